"""Azure's identity plumbing, served locally for tests: a self-signed TLS certificate for
127.0.0.1 (Azurite's OAuth mode needs HTTPS), and App Service's managed identity endpoint, which
the real `ManagedIdentityCredential` calls when `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` are set.

The endpoint mints unsigned JWTs (Azurite's `--oauth basic` checks the audience, issuer and
lifetime, not the signature) for the resource asked for, or for `audience` when one is forced.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.loopback_http import Handler, LoopbackServer

STORAGE_AUDIENCE = "https://storage.azure.com"
TENANT = "72f988bf-0000-4000-8000-00000000a11c"


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files for https://127.0.0.1, valid for a day; the certificate is
    its own CA, so it is also the bundle a client trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def unsigned_jwt(audience: str, lifetime: int = 3600) -> str:
    now = int(time.time())
    claims = {
        "aud": audience,
        "iss": f"https://sts.windows.net/{TENANT}/",
        "iat": now,
        "nbf": now - 60,
        "exp": now + lifetime,
        "tid": TENANT,
        "oid": "00000000-0000-4000-8000-0000000000b0",
    }
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


def _b64(document: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


@dataclass(frozen=True)
class TokenRequest:
    api_version: str
    resource: str
    client_id: str | None
    header_ok: bool


class IdentityEndpoint:
    """App Service's managed identity protocol on a loopback port: `GET ?api-version=2019-08-01
    &resource=R[&client_id=C]` with `X-IDENTITY-HEADER` answers `{access_token, expires_on,
    resource, token_type}`. Every request is recorded in `requests`."""

    def __init__(self, audience: str | None = None):
        self.header = secrets.token_urlsafe(24)
        self.audience = audience
        self.requests: list[TokenRequest] = []
        self._loopback = LoopbackServer(_handler(self))

    @property
    def url(self) -> str:
        return f"{self._loopback.origin}/msi/token"

    def env(self) -> dict[str, str]:
        return {"IDENTITY_ENDPOINT": self.url, "IDENTITY_HEADER": self.header}

    def close(self) -> None:
        self._loopback.close()

    def answer(self, query: dict[str, list[str]], header: str | None) -> tuple[int, dict]:
        request = TokenRequest(
            api_version=query.get("api-version", [""])[0],
            resource=query.get("resource", [""])[0],
            client_id=query.get("client_id", [None])[0],
            header_ok=header == self.header,
        )
        self.requests.append(request)
        if not request.header_ok or request.api_version != "2019-08-01" or not request.resource:
            return 400, {"error": "invalid_request", "error_description": "bad identity request"}
        token = unsigned_jwt(self.audience or request.resource)
        expires_on = str(int(time.time()) + 3600)
        return 200, {
            "access_token": token,
            "expires_on": expires_on,
            "resource": request.resource,
            "token_type": "Bearer",
            "client_id": request.client_id or "system-assigned",
        }


def _handler(endpoint: IdentityEndpoint) -> type[BaseHTTPRequestHandler]:
    class Token(Handler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            status, body = endpoint.answer(
                parse_qs(urlsplit(self.path).query), self.headers.get("X-IDENTITY-HEADER")
            )
            self.answer(status, json.dumps(body).encode(), {"Content-Type": "application/json"})

    return Token

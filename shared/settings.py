"""The storefront's configuration, read once from the environment (app settings on Azure,
`local.settings.json` Values locally) into one validated object.

Malformed values fail at start-up with a message naming the setting. Missing production secrets do
not stop the app from serving health checks and replays; they are listed in `missing_secrets`, and
the purchase flow refuses to mint tokens until they are set.

Key Vault references: a setting whose value is still `@Microsoft.KeyVault(...)` (or
`@Microsoft.AppConfiguration(...)`) was not resolved by the platform and reaches the app as that
literal. Any setting the app reads is checked: such a value counts as unset (the literal is never
used, as a secret or otherwise) and the setting is listed in `unresolved_settings`; health reports
it and purchases are refused until it resolves.

Storage, as the Functions host reads it (`AzureWebJobsStorage`):
- a connection string in `AzureWebJobsStorage` (Azurite locally; the default is
  `UseDevelopmentStorage=true`), or
- an identity-based connection: `AzureWebJobsStorage__accountName` (service URIs
  `https://<account>.table|blob.core.windows.net`), and/or `AzureWebJobsStorage__tableServiceUri`
  and `__blobServiceUri` (which win over the account name), with `__credential=managedidentity`
  and `__clientId` for a user-assigned identity.
A connection string beside any identity setting is refused at start-up rather than one silently
winning: an app still holding the key it was meant to drop should say so. The identity is
`ManagedIdentityCredential` (with the client id when given) when `__credential=managedidentity` or
where the platform offers a managed identity endpoint (`IDENTITY_ENDPOINT`, as on App Service and
Functions); elsewhere, a developer machine, `DefaultAzureCredential` (environment, Azure CLI, ...)
is the fallback.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from urllib.parse import urlsplit

DEFAULT_BREVO_BASE_URL = "https://api.brevo.com/v3"
SECRET_SETTINGS = ("BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET")
STORAGE = "AzureWebJobsStorage"
DEVELOPMENT_STORAGE = "UseDevelopmentStorage=true"
IDENTITY_SETTINGS = tuple(
    f"{STORAGE}__{name}"
    for name in ("accountName", "blobServiceUri", "tableServiceUri", "credential", "clientId")
)
# The credential the app's storage clients use with an identity-based connection.
MANAGED_IDENTITY = "ManagedIdentityCredential"
DEVELOPER_IDENTITY = "DefaultAzureCredential"
_REFERENCE = re.compile(r"@Microsoft\.(KeyVault|AppConfiguration)\(.*\)", re.IGNORECASE | re.DOTALL)
_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")


def is_unresolved_reference(value: str) -> bool:
    """True for a Key Vault (or App Configuration) reference the platform did not resolve."""
    return _REFERENCE.fullmatch(value.strip()) is not None


class SettingsError(ValueError):
    """A setting is present but malformed."""


@dataclass(frozen=True)
class Settings:
    storage_connection_string: str = DEVELOPMENT_STORAGE  # "" with an identity-based connection
    storage_table_uri: str = ""
    storage_blob_uri: str = ""
    storage_credential: str = ""  # MANAGED_IDENTITY or DEVELOPER_IDENTITY with service URIs
    storage_client_id: str = ""
    brevo_api_key: str = ""
    brevo_base_url: str = DEFAULT_BREVO_BASE_URL
    brevo_timeout_seconds: float = 10.0
    rate_limit_per_hour: int = 5
    recipient_limit_per_day: int = 3
    daily_cost_ceiling_usd: Decimal = Decimal("5.00")
    cost_per_purchase_usd: Decimal = Decimal("0.01")
    cost_counter_shards: int = 8
    signing_key_pem: str = ""
    hash_secret: str = ""
    sender_email: str = "store@example.com"
    sender_name: str = "Storefront"
    public_base_url: str = "http://localhost:7071"
    allowed_origins: tuple[str, ...] = ()
    trusted_proxy_hops: int = 0  # proxies of the operator's own in front of Azure's front end
    front_door_id: str = ""  # X-Azure-FDID of the operator's Front Door: its client-IP header is trusted
    download_token_ttl_seconds: int = 7 * 24 * 3600
    storage_timeout_seconds: float = 5.0
    idempotency_lease_seconds: int = 600
    idempotency_ttl_seconds: int = 24 * 3600
    idempotency_fail_open: bool = False
    idempotency_table: str = "idempotency"
    governance_table: str = "governance"
    receipts_container: str = "receipts"
    bundles_container: str = "bundles"
    ledger_table: str = "ledger"
    retired_public_keys: tuple[dict, ...] = ()
    missing_secrets: tuple[str, ...] = field(default=())
    unresolved_settings: tuple[str, ...] = ()

    @property
    def not_configured(self) -> tuple[str, ...]:
        """Every setting that stops purchases: missing secrets, then unresolved references."""
        return tuple(dict.fromkeys(self.missing_secrets + self.unresolved_settings))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        settings = cls._read(os.environ if env is None else env)
        if (
            settings.idempotency_ttl_seconds + settings.idempotency_lease_seconds
            > settings.download_token_ttl_seconds
        ):
            raise SettingsError(
                "STOREFRONT_IDEMPOTENCY_TTL_SECONDS plus STOREFRONT_IDEMPOTENCY_LEASE_SECONDS must not "
                "exceed STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS: a replay would hand out a receipt for "
                "a download link that no longer works"
            )
        return settings

    @classmethod
    def _read(cls, env: Mapping[str, str]) -> Settings:
        r = _Reader(env)
        website = env.get("WEBSITE_HOSTNAME", "").strip()
        default_base = f"https://{website}" if website else "http://localhost:7071"
        secrets = {name: r.text(name, "") for name in SECRET_SETTINGS}
        values = dict(
            **_storage(r, env),
            brevo_api_key=secrets["BREVO_API_KEY"],
            signing_key_pem=secrets["STOREFRONT_SIGNING_KEY"].replace("\\n", "\n"),
            hash_secret=secrets["STOREFRONT_HASH_SECRET"],
            brevo_base_url=r.text("BREVO_BASE_URL", DEFAULT_BREVO_BASE_URL).rstrip("/"),
            brevo_timeout_seconds=float(r.decimal("STOREFRONT_BREVO_TIMEOUT_SECONDS", "10", low="0.1")),
            rate_limit_per_hour=r.integer("STOREFRONT_RATE_LIMIT_PER_HOUR", 5, low=1),
            recipient_limit_per_day=r.integer("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", 3, low=1),
            daily_cost_ceiling_usd=r.decimal("STOREFRONT_DAILY_COST_CEILING_USD", "5.00", low="0"),
            cost_per_purchase_usd=r.decimal("STOREFRONT_COST_PER_PURCHASE_USD", "0.01", low="0"),
            cost_counter_shards=r.integer("STOREFRONT_COST_COUNTER_SHARDS", 8, low=1),
            sender_email=r.text("STOREFRONT_SENDER_EMAIL", "store@example.com"),
            sender_name=r.text("STOREFRONT_SENDER_NAME", "Storefront"),
            public_base_url=r.text("STOREFRONT_PUBLIC_BASE_URL", default_base).rstrip("/"),
            allowed_origins=r.hosts("STOREFRONT_ALLOWED_ORIGINS"),
            trusted_proxy_hops=r.integer("STOREFRONT_TRUSTED_PROXY_HOPS", 0, low=0),
            front_door_id=r.text("STOREFRONT_FRONT_DOOR_ID", ""),
            download_token_ttl_seconds=r.integer(
                "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", 7 * 24 * 3600, low=60
            ),
            storage_timeout_seconds=float(r.decimal("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "5", low="0.1")),
            idempotency_lease_seconds=r.integer("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", 600, low=1),
            idempotency_ttl_seconds=r.integer("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, low=1),
            idempotency_fail_open=r.boolean("STOREFRONT_IDEMPOTENCY_FAIL_OPEN", False),
            idempotency_table=r.text("STOREFRONT_IDEMPOTENCY_TABLE", "idempotency"),
            governance_table=r.text("STOREFRONT_GOVERNANCE_TABLE", "governance"),
            receipts_container=r.text("STOREFRONT_RECEIPTS_CONTAINER", "receipts"),
            bundles_container=r.text("STOREFRONT_BUNDLES_CONTAINER", "bundles"),
            ledger_table=r.text("STOREFRONT_LEDGER_TABLE", "ledger"),
            retired_public_keys=r.jwks("STOREFRONT_RETIRED_PUBLIC_KEYS"),
        )
        missing = tuple(name for name, value in secrets.items() if not value)
        return cls(**values, missing_secrets=missing, unresolved_settings=tuple(r.unresolved))


def _storage(r: _Reader, env: Mapping[str, str]) -> dict[str, str]:
    """The storage fields: a connection string, or service URIs with the credential to use."""
    connection = r.text(STORAGE, "")
    given = {name.removeprefix(f"{STORAGE}__"): r.text(name, "") for name in IDENTITY_SETTINGS}
    identity = [f"{STORAGE}__{name}" for name, value in given.items() if value]
    account, credential, client_id = given["accountName"], given["credential"], given["clientId"]
    if not identity:
        return {"storage_connection_string": connection or DEVELOPMENT_STORAGE}
    if connection:
        raise SettingsError(
            f"{STORAGE} (a connection string) and {identity[0]} (an identity-based connection) are both "
            f"set: keep the identity settings on Azure, or only {STORAGE} locally (Azurite)"
        )
    if account and not _ACCOUNT_NAME.fullmatch(account):
        raise SettingsError(f"{STORAGE}__accountName must be 3 to 24 lowercase letters and digits")
    if credential and credential.lower() != "managedidentity":
        raise SettingsError(f"{STORAGE}__credential must be managedidentity when set")
    if client_id and not _is_guid(client_id):
        raise SettingsError(f"{STORAGE}__clientId must be the managed identity's client id (a GUID)")
    on_platform = bool(env.get("IDENTITY_ENDPOINT", "").strip())
    return {
        "storage_connection_string": "",
        "storage_table_uri": _service_uri("tableServiceUri", given, "table"),
        "storage_blob_uri": _service_uri("blobServiceUri", given, "blob"),
        "storage_credential": MANAGED_IDENTITY if credential or on_platform else DEVELOPER_IDENTITY,
        "storage_client_id": client_id,
    }


def _service_uri(key: str, given: dict[str, str], service: str) -> str:
    """The service's URI as given, else derived from the account name. Tokens go over TLS only,
    and a query string could carry a SAS: neither is accepted (the value is not echoed)."""
    name, uri, account = f"{STORAGE}__{key}", given[key], given["accountName"]
    if not uri:
        if not account:
            raise SettingsError(
                f"{name} (or {STORAGE}__accountName) must be set for an identity-based connection: "
                f"the app keeps its state in {service} storage"
            )
        return f"https://{account}.{service}.core.windows.net"
    try:
        parts = urlsplit(uri)
        usable = parts.scheme.lower() == "https" and parts.hostname and not (parts.query or parts.fragment)
    except ValueError:
        usable = False
    if not usable:
        raise SettingsError(f"{name} must be an https:// URL with no query string")
    return uri.rstrip("/")


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _is_public_ec_jwk(jwk: object) -> bool:
    return (
        isinstance(jwk, dict)
        and jwk.get("kty") == "EC"
        and jwk.get("crv") == "P-256"
        and all(isinstance(jwk.get(m), str) and jwk.get(m) for m in ("x", "y"))
        and "d" not in jwk
    )


class _Reader:
    """Reads settings by name, setting aside (as unset) every value that is an unresolved
    reference and remembering its name."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.unresolved: list[str] = []

    def raw(self, name: str) -> str:
        value = self.env.get(name, "").strip()
        if is_unresolved_reference(value):
            self.unresolved.append(name)
            return ""
        return value

    def text(self, name: str, default: str) -> str:
        return self.raw(name) or default

    def integer(self, name: str, default: int, *, low: int) -> int:
        raw = self.raw(name)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
        if value < low:
            raise SettingsError(f"{name} must be at least {low}, got {value}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        raw = self.raw(name).lower()
        if not raw:
            return default
        if raw not in ("true", "false", "1", "0"):
            raise SettingsError(f"{name} must be true or false, got {raw!r}")
        return raw in ("true", "1")

    def decimal(self, name: str, default: str, *, low: str) -> Decimal:
        raw = self.raw(name) or default
        try:
            value = Decimal(raw)
        except InvalidOperation:
            raise SettingsError(f"{name} must be a number, got {raw!r}") from None
        if not value.is_finite() or value < Decimal(low):
            raise SettingsError(f"{name} must be a number of at least {low}, got {raw!r}")
        return value

    def jwks(self, name: str) -> tuple[dict, ...]:
        """Public EC P-256 keys, as a JWKS (`{"keys": [...]}`) or a JSON list of JWKs."""
        raw = self.raw(name)
        if not raw:
            return ()
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise SettingsError(f"{name} must be JSON: a JWKS or a list of public JWKs") from None
        keys = parsed.get("keys") if isinstance(parsed, dict) else parsed
        if not isinstance(keys, list) or not all(_is_public_ec_jwk(k) for k in keys):
            raise SettingsError(f"{name} must list public EC P-256 JWKs (kty, crv, x, y)")
        return tuple(keys)

    def hosts(self, name: str) -> tuple[str, ...]:
        """Host names from a comma-separated list; full origins (https://host:port) are reduced."""
        entries = (h.strip() for h in self.raw(name).split(","))
        hosts = tuple((urlsplit(h).hostname or "") if "://" in h else h.lower() for h in entries if h)
        if "" in hosts:
            raise SettingsError(f"{name} must list host names or origins, comma-separated")
        return hosts

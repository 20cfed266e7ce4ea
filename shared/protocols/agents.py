"""Which agent is asking: Web Bot Auth (RFC 9421 HTTP Message Signatures tagged `web-bot-auth`)
on every purchase door. A request without such a signature is an unverified caller, as before; one
with a signature that cannot be accepted (malformed, expired, replayed, a key its directory does
not hold, a directory that cannot be fetched or is not allowed) is refused with 401 before any
limit is counted. A verified agent is its directory's origin and its key's JWK thumbprint.
docs/agents.md has the rules and their sources.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

import http_sf
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, HTTPSignatureKeyResolver, algorithms
from http_message_signatures.exceptions import HTTPMessageSignaturesException

from shared.config.errors import NotConfigured, SignatureRefused, StorageOutage
from shared.config.hashing import Hasher
from shared.config.printable import printable
from shared.config.urls import canonical_origin
from shared.protocols.failures import log_unexpected
from shared.protocols.http import JSON_TYPE, Answer, Request
from shared.purchase.agent import Agent
from shared.seams.counters import Reservation, TableCounters
from shared.seams.key_directory import DIRECTORY_PATH, Directory, DirectoryUnavailable, KeyDirectories

TAG = "web-bot-auth"
MAX_AGE_SECONDS = 300  # a signature is accepted this long after its `created`
CLOCK_SKEW_SECONDS = 30  # how far the signer's clock may run ahead of, or behind, the store's
REFETCH_AFTER_SECONDS = 60  # a keyid the cached directory lacks fetches it again, at most this often
MAX_HEADER = 4096
CHALLENGE = 'Signature tag="web-bot-auth"'  # the 401's WWW-Authenticate: what would be accepted
log = logging.getLogger("storefront.agents")


@dataclass(frozen=True)
class AgentPolicy:
    allowed: tuple[str, ...] = ()  # origins whose directories are fetched; empty: any
    denied: tuple[str, ...] = ()  # origins never fetched
    local: bool = False  # off Azure: http:// origins (a developer's agent on localhost) are allowed


class AgentVerifier:
    def __init__(
        self,
        directories: KeyDirectories,
        nonces: TableCounters,
        hasher: Hasher,
        policy: AgentPolicy,
        clock: Callable[[], float] = time.time,
    ):
        self._directories = directories
        self._nonces = nonces
        self._hasher = hasher
        self._policy = policy
        self._clock = clock

    def identify(self, req: Request) -> Agent | None:
        """The verified agent that signed `req`; None when it carries no Web Bot Auth signature.
        Raises SignatureRefused, or ReplayUnchecked when storage cannot say whether the signature
        was used before."""
        if req.header("signature-input") is None:
            return None
        label, params, covered = _web_bot_auth_signature(req)
        if label is None:
            return None
        keyid = params.get("keyid")
        if not isinstance(keyid, str) or not keyid:
            raise SignatureRefused("the web-bot-auth signature has no keyid")
        if params.get("alg", "ed25519") != "ed25519":
            raise SignatureRefused("the web-bot-auth signature must use alg ed25519")
        self._check_times(params.get("created"), params.get("expires"))
        origin, agent_component = self._origin(req, covered)
        directory = self._directory(origin)
        if keyid not in directory.keys:
            directory = self._directory(origin, older_than=REFETCH_AFTER_SECONDS)
        if keyid not in directory.keys:
            raise SignatureRefused(f"the key directory of {origin} holds no key with this keyid")
        self._verify(req, label, agent_component, Ed25519PublicKey.from_public_bytes(directory.keys[keyid]))
        if not self._first_use(keyid, params["created"], params.get("nonce"), _signature_bytes(req, label)):
            raise SignatureRefused(
                "this signature was used before: sign each request afresh, with a new nonce"
            )
        return Agent(origin=origin, key=keyid)

    def _check_times(self, created: object, expires: object) -> None:
        """`created` at most MAX_AGE_SECONDS ago and not in the future, `expires` not past, each
        give or take CLOCK_SKEW_SECONDS: the window inside which a nonce is remembered."""
        if not isinstance(created, int) or isinstance(created, bool):
            raise SignatureRefused("the web-bot-auth signature has no created time")
        if not isinstance(expires, int) or isinstance(expires, bool):
            raise SignatureRefused("the web-bot-auth signature has no expires time")
        now = self._clock()
        if created > now + CLOCK_SKEW_SECONDS:
            raise SignatureRefused("the web-bot-auth signature was created in the future")
        if expires < now - CLOCK_SKEW_SECONDS:
            raise SignatureRefused("the web-bot-auth signature has expired")
        if created < now - MAX_AGE_SECONDS - CLOCK_SKEW_SECONDS:
            raise SignatureRefused(f"the web-bot-auth signature is older than {MAX_AGE_SECONDS} seconds")

    def _origin(self, req: Request, covered: list[tuple[str, dict]]) -> tuple[str, str]:
        """The agent's origin from Signature-Agent, which the signature must cover (a string, or
        the dictionary member its `key` parameter names), checked against the settings' lists."""
        header = req.header("signature-agent")
        if header is None:
            raise SignatureRefused("no Signature-Agent header names the agent's key directory")
        member = next((p for name, p in covered if name == "signature-agent"), None)
        if member is None:
            raise SignatureRefused("the signature does not cover the Signature-Agent header")
        uri = _signature_agent(header, member.get("key"))
        paths = ("", DIRECTORY_PATH)
        origin = canonical_origin(uri, paths=paths) if isinstance(uri, str) else None
        if origin is None or (origin.startswith("http://") and not self._policy.local):
            raise SignatureRefused("Signature-Agent must name the agent's https origin")
        if origin in self._policy.denied:
            raise SignatureRefused(f"agents of {origin} are refused here (STOREFRONT_AGENT_ORIGINS_DENIED)")
        if self._policy.allowed and origin not in self._policy.allowed:
            raise SignatureRefused(f"{origin} is not among STOREFRONT_AGENT_ORIGINS_ALLOWED")
        component = http_sf.ser(("signature-agent", {"key": member["key"]} if "key" in member else {}))
        return origin, component

    def _directory(self, origin: str, older_than: float | None = None) -> Directory:
        try:
            return self._directories.keys(origin, older_than=older_than)
        except DirectoryUnavailable as exc:
            raise SignatureRefused(f"the key directory of {origin} cannot be used: {exc}") from None

    def _verify(self, req: Request, label: str, agent_component: str, key: Ed25519PublicKey) -> None:
        """RFC 9421 verification by the library: the signature base from the covered components,
        @authority and Signature-Agent among them, and the Ed25519 signature over it."""
        verifier = _Verifier(signature_algorithm=algorithms.ED25519, key_resolver=_OneKey(key))
        message = _Message(req.method.upper(), req.url, req.headers)
        try:
            verifier.verify(
                message,
                expect_tag=TAG,
                expect_label=label,
                require_components=("@authority", agent_component),
                max_age=None,
            )
        except (HTTPMessageSignaturesException, ValueError, TypeError, KeyError) as exc:
            raise SignatureRefused(f"the web-bot-auth signature does not verify: {_reason(exc)}") from None

    def _first_use(self, keyid: str, created: int, nonce: object, signature: bytes) -> bool:
        """Whether this is the signature's first use: its nonce (or, without one, the signature's
        own bytes, however its header is written) is counted once in Table storage, across every
        instance, in a row named by the signed `created` day (so a replay, which carries the same
        `created`, finds it on the next day too). Raises ReplayUnchecked when storage, or the hash
        secret, is not there."""
        token = nonce if isinstance(nonce, str) and nonce else "signature:" + signature.hex()
        day = datetime.datetime.fromtimestamp(created, datetime.timezone.utc).strftime("nonce-%Y%m%d")
        try:
            key = self._hasher.nonce(f"{keyid}\x00{token}")
            return self._nonces.add(Reservation(key, day, 1), limit=1, likely_new=True) is not None
        except (StorageOutage, NotConfigured) as exc:
            raise ReplayUnchecked(str(exc)) from None


class ReplayUnchecked(Exception):
    """The replay check could not be made (storage did not answer, or no hash secret is set):
    the signature cannot be relied on, and the caller is served unverified."""


def identified(
    req: Request,
    verifier: AgentVerifier | None,
    answer: Callable[[Request], Answer],
    *,
    rpc: bool,
    addressed: Request | None = None,
) -> Answer:
    """`answer` for the request with its verified agent (if any) attached; a refused signature is
    a 401 (a JSON-RPC error where `rpc`) and nothing else runs. `addressed`: the request with the
    URL its sender addressed (`http.as_addressed`), which the signature is checked against."""
    if verifier is None:
        return answer(req)
    try:
        agent = verifier.identify(addressed or req)
    except SignatureRefused as exc:
        return refused(exc, rpc=rpc)
    except ReplayUnchecked as exc:
        log.warning("web-bot-auth signature not relied on: its replay could not be checked (%s)", exc)
        agent = None
    except Exception as exc:  # noqa: BLE001 - the headers and the directory are a stranger's; never a 500
        correlation_id = log_unexpected(exc, "the web-bot-auth check")  # by type and place, not message
        message = f"the web-bot-auth signature could not be checked; correlation id {correlation_id}"
        return refused(SignatureRefused(message), rpc=rpc)
    return answer(replace(req, agent=agent))


def refused(exc: SignatureRefused, *, rpc: bool) -> Answer:
    """The 401 for a refused signature: the error's code and message, as JSON-RPC where `rpc`."""
    error = {"code": exc.code, "message": exc.message}
    payload: dict = (
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": exc.message, "data": error}}
        if rpc
        else {"error": error}
    )
    headers = {"Content-Type": JSON_TYPE, "Cache-Control": "no-store", "WWW-Authenticate": CHALLENGE}
    return Answer(exc.status, json.dumps(payload).encode(), headers)


def _web_bot_auth_signature(req: Request) -> tuple[str | None, dict, list[tuple[str, dict]]]:
    """The label, parameters and covered components of the first signature tagged web-bot-auth;
    (None, {}, []) when none is."""
    text = req.header("signature-input") or ""
    sizes = [len(req.header(name) or "") for name in ("signature-input", "signature", "signature-agent")]
    if req.header("signature") is None or max(sizes) > MAX_HEADER:
        raise SignatureRefused(
            "Signature-Input and Signature must both be sent, and they and Signature-Agent must each be "
            "under 4 KiB"
        )
    try:
        parsed: Any = http_sf.parse(text.encode(), tltype="dictionary")
    except Exception:  # http_sf raises ValueError and others on malformed input
        raise SignatureRefused("Signature-Input is not a structured-field dictionary") from None
    for label, (members, params) in parsed.items():
        if params.get("tag") == TAG and isinstance(members, list):
            covered = [(str(name).lower(), dict(p)) for name, p in members]
            return label, dict(params), covered
    return None, {}, []


def _signature_bytes(req: Request, label: str) -> bytes:
    """The signature value of `label`, decoded: what a replay carries, whatever else it changes in
    the Signature header (parameters, spaces, other members). It verified, so it parses."""
    members = cast(dict, http_sf.parse((req.header("signature") or "").encode(), tltype="dictionary"))
    value, _ = members[label]
    return bytes(value)


def _signature_agent(header: str, key: object) -> object:
    """The URI the Signature-Agent header gives: the member `key` names (the working group's
    dictionary form), or the whole field as one string (the earlier form). Only a key directory
    is read: a member typed otherwise (`type=jwks_uri`, `type=cimd`) is refused."""
    try:
        if key is None:
            value, params = cast(tuple, http_sf.parse(header.encode(), tltype="item"))
        else:
            members = cast(dict, http_sf.parse(header.encode(), tltype="dictionary"))
            value, params = members.get(key, (None, {}))
    except Exception:  # http_sf raises ValueError and others on malformed input
        raise SignatureRefused("Signature-Agent is not a structured-field string or dictionary") from None
    kind = params.get("type", "directory") if isinstance(params, dict) else None
    if kind != "directory":
        raise SignatureRefused("Signature-Agent must name a key directory (type=directory)")
    return value


def _reason(exc: Exception) -> str:
    return printable(str(exc) or type(exc).__name__)[:200]


class _Verifier(HTTPMessageVerifier):
    """The library's verifier with the time window left to `AgentVerifier._check_times`, which
    reads the store's clock (and the draft's test vectors' clock in the tests)."""

    def validate_created_and_expires(self, sig_input: Any, max_age: Any = None) -> None:
        return None


class _OneKey(HTTPSignatureKeyResolver):
    def __init__(self, key: Ed25519PublicKey):
        self._key = key

    def resolve_public_key(self, key_id: str) -> Ed25519PublicKey:
        return self._key


@dataclass(frozen=True)
class _Message:
    method: str
    url: str
    headers: Mapping[str, str]

"""Reading one setting: its raw text, where a Key Vault (or App Configuration) reference the
platform did not resolve counts as unset and is remembered, then the kind the app wants (a bounded
integer or number, money in whole millionths, a boolean, a URL, a GUID, an Azure table or
container name, public JWKs, host names) in the one form the app uses it in, or a `SettingsError`
naming the setting that never echoes a long value. docs/configuration.md#written-forms"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from shared.config.keys import retired_key_problem
from shared.config.urls import DEFAULT_PORTS, canonical_origin, canonical_url, origin_host

# Costs are counted in whole millionths of a dollar.
MONEY_PLACES = 6
_REFERENCE = re.compile(r"@Microsoft\.(KeyVault|AppConfiguration)\(.*\)", re.IGNORECASE | re.DOTALL)
# ASCII digits with an optional sign and no leading zero (`010` is eight to some readers).
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"[+-]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,6})?")
BOOLEANS = {"true": True, "false": False, "1": True, "0": False}  # in any case
# A GUID as 32 hex digits, hyphenated 8-4-4-4-12 or not, in braces or after `urn:uuid:` or bare.
_GUID = re.compile(
    r"(?:urn:uuid:)?(\{)?([0-9a-f]{8}(-?)[0-9a-f]{4}\3[0-9a-f]{4}\3[0-9a-f]{4}\3[0-9a-f]{12})(?(1)\})",
    re.IGNORECASE,
)
# Azure's naming rules: a table is 3-63 letters and digits starting with a letter; a container is
# 3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit.
TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")
CONTAINER_NAME = re.compile(r"(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*")


class SettingsError(ValueError):
    """A setting is present but malformed."""


def is_unresolved_reference(value: str) -> bool:
    """True for a Key Vault (or App Configuration) reference the platform did not resolve."""
    return _REFERENCE.fullmatch(value.strip()) is not None


def canonical_guid(value: str) -> str | None:
    """A GUID in the one form Azure sends it (lowercase, hyphenated), from braces, `urn:uuid:`,
    bare hex or upper case; None for anything else, such as a sign or a digit `int` reads but
    that is not ASCII hex, which `uuid.UUID` would take as another GUID."""
    found = _GUID.fullmatch(value.strip()) if isinstance(value, str) else None
    return str(uuid.UUID(found[2])) if found else None


def _shown(raw: str) -> str:
    """A value as an error message quotes it: a long one cut short."""
    return repr(raw if len(raw) <= 40 else raw[:40] + "...")


def _unique_members(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose every member is named once: readers disagree on which of two wins."""
    members = dict(pairs)
    if len(members) != len(pairs):
        raise ValueError("a member named twice")
    return members


class SettingReader:
    """Reads settings by name, setting aside (as unset) every value that is an unresolved
    reference and remembering its name; `bounds` holds each numeric setting's lowest and highest
    value, as text."""

    def __init__(self, env: Mapping[str, str], bounds: Mapping[str, tuple[str, str]]):
        self.env = env
        self.bounds = bounds
        self.unresolved: list[str] = []

    def raw(self, name: str) -> str:
        value = self.env.get(name, "").strip()
        try:
            value.encode()
        except UnicodeEncodeError:  # undecodable bytes in the environment: nothing could send them
            raise SettingsError(f"{name} is not valid UTF-8 text") from None
        if is_unresolved_reference(value):
            self.unresolved.append(name)
            return ""
        return value

    def text(self, name: str, default: str) -> str:
        return self.raw(name) or default

    def integer(self, name: str, default: int) -> int:
        """A whole number (ASCII digits, an optional sign) within `bounds[name]`."""
        raw = self.raw(name)
        if not raw:
            return default
        low, high = self.bounds[name]
        if not _INTEGER.fullmatch(raw):
            raise SettingsError(f"{name} must be an integer from {low} to {high}, got {_shown(raw)}")
        return int(self._bounded(name, Decimal(raw), raw))

    def boolean(self, name: str, default: bool) -> bool:
        """`true` or `false` in any case, or `1` or `0`."""
        raw = self.raw(name)
        if not raw:
            return default
        if raw.lower() not in BOOLEANS:
            raise SettingsError(f"{name} must be true or false (or 1 or 0), got {_shown(raw)}")
        return BOOLEANS[raw.lower()]

    def decimal(self, name: str, default: str) -> Decimal:
        """A finite number within `bounds[name]`, written out without an exponent."""
        raw = self.raw(name) or default
        low, high = self.bounds[name]
        try:
            value = Decimal(raw) if _NUMBER.fullmatch(raw) else None
        except InvalidOperation:
            value = None
        if value is None:
            raise SettingsError(f"{name} must be a number from {low} to {high}, got {_shown(raw)}")
        return Decimal(format(self._bounded(name, value, raw), "f"))

    def money(self, name: str, default: str) -> Decimal:
        """Dollars in whole millionths, the unit the cost counter adds up."""
        value = self.decimal(name, default)
        if value != value.quantize(Decimal(1).scaleb(-MONEY_PLACES)):
            places = f"at most {MONEY_PLACES} decimal places"
            raise SettingsError(f"{name} must be in whole millionths ({places}), got {_shown(str(value))}")
        return value

    def _bounded(self, name: str, value: Decimal, raw: str) -> Decimal:
        low, high = self.bounds[name]
        if not Decimal(low) <= value <= Decimal(high):
            raise SettingsError(f"{name} must be from {low} to {high}, got {_shown(raw)}")
        return value.copy_abs() if value.is_zero() else value  # -0 is 0

    def url(self, name: str, default: str) -> str:
        """An http(s) URL with a host and no user, query or fragment, as `canonical_url` writes it."""
        value = self.text(name, default)
        try:
            return canonical_url(value, tuple(DEFAULT_PORTS))
        except ValueError as exc:
            raise SettingsError(f"{name} must be an http:// or https:// URL with a host: {exc}") from None

    def optional_url(self, name: str) -> str:
        """`url`'s URL, or "" when the setting is not set."""
        return self.url(name, "") if self.raw(name) else ""

    def guid(self, name: str) -> str:
        raw = self.raw(name)
        if not raw:
            return ""
        guid = canonical_guid(raw)
        if guid is None:
            raise SettingsError(f"{name} must be a GUID, as Azure shows it, got {_shown(raw)}")
        return guid

    def name(self, name: str, default: str, rule: re.Pattern[str]) -> str:
        """A table, container or queue name that Azure accepts."""
        value = self.text(name, default)
        if not rule.fullmatch(value) or value.lower() == "tables":
            kind = {TABLE_NAME: "table", CONTAINER_NAME: "container"}.get(rule, "queue prefix")
            raise SettingsError(f"{name} is not a name Azure accepts for a {kind}, got {_shown(value)}")
        return value

    def jwks(self, name: str) -> tuple[dict, ...]:
        """Public EC P-256 keys, as a JWKS (`{"keys": [...]}`) or a JSON list of JWKs, each as
        `shared.config.keys.retired_key_problem` accepts it; no JSON object names a member twice."""
        raw = self.raw(name)
        if not raw:
            return ()
        try:
            parsed = json.loads(raw, object_pairs_hook=_unique_members)
        except (ValueError, RecursionError):
            raise SettingsError(
                f"{name} must be JSON, each member named once: a JWKS or a list of public JWKs"
            ) from None
        keys = parsed.get("keys") if isinstance(parsed, dict) else parsed
        if not isinstance(keys, list):
            raise SettingsError(f"{name} must list public EC P-256 JWKs (kty, crv, x, y)")
        for number, jwk in enumerate(keys, 1):
            if problem := retired_key_problem(jwk):
                raise SettingsError(f"{name} must list public EC P-256 JWKs: key {number} {problem}")
        return tuple(keys)

    def hosts(self, name: str) -> tuple[str, ...]:
        """Host names from a comma-separated list of host names and origins (`https://host:port`,
        reduced to the host), each as an Origin header's host is compared, listed once."""
        hosts = []
        for entry in filter(None, (h.strip() for h in self.raw(name).split(","))):
            try:
                hosts.append(origin_host(entry))
            except ValueError as exc:
                raise SettingsError(
                    f"{name} must list host names or origins, comma-separated: {_shown(entry)} {exc}"
                ) from None
        return tuple(dict.fromkeys(hosts))

    def origins(self, name: str) -> tuple[str, ...]:
        """Web origins (`https://agent.example`) from a comma-separated list, each in the form an
        agent's Signature-Agent is compared in (`canonical_origin`), listed once."""
        origins = []
        for entry in filter(None, (part.strip() for part in self.raw(name).split(","))):
            origin = canonical_origin(entry)
            if origin is None:
                raise SettingsError(
                    f"{name} must list origins such as https://agent.example, comma-separated; "
                    f"{_shown(entry)} is not one"
                )
            origins.append(origin)
        return tuple(dict.fromkeys(origins))

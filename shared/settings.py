"""The storefront's configuration, read once from the environment (app settings on Azure,
`local.settings.json` Values locally) into one validated object.

Malformed values fail at start-up with a message naming the setting. Missing production secrets do
not stop the app from serving health checks and replays; they are listed in `missing_secrets`, and
the purchase flow refuses to mint tokens until they are set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from urllib.parse import urlsplit

DEFAULT_BREVO_BASE_URL = "https://api.brevo.com/v3"
SECRET_SETTINGS = ("BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET")


class SettingsError(ValueError):
    """A setting is present but malformed."""


@dataclass(frozen=True)
class Settings:
    storage_connection_string: str = "UseDevelopmentStorage=true"
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
        return cls(
            storage_connection_string=r.text("AzureWebJobsStorage", "UseDevelopmentStorage=true"),
            brevo_api_key=r.text("BREVO_API_KEY", ""),
            brevo_base_url=r.text("BREVO_BASE_URL", DEFAULT_BREVO_BASE_URL).rstrip("/"),
            brevo_timeout_seconds=float(r.decimal("STOREFRONT_BREVO_TIMEOUT_SECONDS", "10", low="0.1")),
            rate_limit_per_hour=r.integer("STOREFRONT_RATE_LIMIT_PER_HOUR", 5, low=1),
            recipient_limit_per_day=r.integer("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", 3, low=1),
            daily_cost_ceiling_usd=r.decimal("STOREFRONT_DAILY_COST_CEILING_USD", "5.00", low="0"),
            cost_per_purchase_usd=r.decimal("STOREFRONT_COST_PER_PURCHASE_USD", "0.01", low="0"),
            cost_counter_shards=r.integer("STOREFRONT_COST_COUNTER_SHARDS", 8, low=1),
            signing_key_pem=r.text("STOREFRONT_SIGNING_KEY", "").replace("\\n", "\n"),
            hash_secret=r.text("STOREFRONT_HASH_SECRET", ""),
            sender_email=r.text("STOREFRONT_SENDER_EMAIL", "store@example.com"),
            sender_name=r.text("STOREFRONT_SENDER_NAME", "Storefront"),
            public_base_url=r.text("STOREFRONT_PUBLIC_BASE_URL", default_base).rstrip("/"),
            allowed_origins=r.hosts("STOREFRONT_ALLOWED_ORIGINS"),
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
            missing_secrets=tuple(name for name in SECRET_SETTINGS if not env.get(name, "").strip()),
        )


def _is_public_ec_jwk(jwk: object) -> bool:
    return (
        isinstance(jwk, dict)
        and jwk.get("kty") == "EC"
        and jwk.get("crv") == "P-256"
        and all(isinstance(jwk.get(m), str) and jwk.get(m) for m in ("x", "y"))
        and "d" not in jwk
    )


class _Reader:
    def __init__(self, env: Mapping[str, str]):
        self.env = env

    def text(self, name: str, default: str) -> str:
        value = self.env.get(name, "").strip()
        return value or default

    def integer(self, name: str, default: int, *, low: int) -> int:
        raw = self.env.get(name, "").strip()
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
        raw = self.env.get(name, "").strip().lower()
        if not raw:
            return default
        if raw not in ("true", "false", "1", "0"):
            raise SettingsError(f"{name} must be true or false, got {raw!r}")
        return raw in ("true", "1")

    def decimal(self, name: str, default: str, *, low: str) -> Decimal:
        raw = self.env.get(name, "").strip() or default
        try:
            value = Decimal(raw)
        except InvalidOperation:
            raise SettingsError(f"{name} must be a number, got {raw!r}") from None
        if not value.is_finite() or value < Decimal(low):
            raise SettingsError(f"{name} must be a number of at least {low}, got {raw!r}")
        return value

    def jwks(self, name: str) -> tuple[dict, ...]:
        """Public EC P-256 keys, as a JWKS (`{"keys": [...]}`) or a JSON list of JWKs."""
        raw = self.env.get(name, "").strip()
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
        entries = (h.strip() for h in self.env.get(name, "").split(","))
        hosts = tuple((urlsplit(h).hostname or "") if "://" in h else h.lower() for h in entries if h)
        if "" in hosts:
            raise SettingsError(f"{name} must list host names or origins, comma-separated")
        return hosts

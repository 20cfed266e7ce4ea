"""The storefront's configuration, read once from the environment (app settings on Azure,
`local.settings.json` Values locally) into one validated object; `shared.config.settings_reader` reads
each value by its kind.

A malformed value, or a number outside its `BOUNDS`, stops the app at start-up, naming the setting.
What stops only purchases is listed instead: `missing_secrets`, `unresolved_settings` (a Key
Vault or App Configuration reference left unresolved) and `refused_secrets` (public or weak, on
Azure; elsewhere used, and listed in `weak_secrets`). Storage is a connection string or identity
settings, never both. docs/configuration.md#start-up-rules has the rules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypedDict

from shared.config import secret_strength
from shared.config.errors import NotConfigured
from shared.config.keys import load_private_key, public_jwk, thumbprint
from shared.config.settings_reader import (
    CONTAINER_NAME,
    TABLE_NAME,
    SettingReader,
    SettingsError,
    canonical_guid,
)
from shared.config.settings_reader import (
    is_unresolved_reference as is_unresolved_reference,  # offered here too
)
from shared.config.urls import canonical_url

DEFAULT_BREVO_BASE_URL = "https://api.brevo.com/v3"
SECRET_SETTINGS = ("BREVO_API_KEY", "STOREFRONT_SIGNING_KEY", "STOREFRONT_HASH_SECRET")
RETIRED_KEYS = "STOREFRONT_RETIRED_PUBLIC_KEYS"
STORAGE = "AzureWebJobsStorage"
EMAIL_TEMPLATE_DIR = "STOREFRONT_EMAIL_TEMPLATE_DIR"
DEVELOPMENT_STORAGE = "UseDevelopmentStorage=true"
IDENTITY_SETTINGS = tuple(
    f"{STORAGE}__{name}"
    for name in (
        "accountName",
        "blobServiceUri",
        "tableServiceUri",
        "queueServiceUri",
        "credential",
        "clientId",
    )
)
# The credential the app's storage clients use with an identity-based connection.
MANAGED_IDENTITY = "ManagedIdentityCredential"
DEVELOPER_IDENTITY = "DefaultAzureCredential"
# Set by the platform wherever Azure runs the app, read-only, never by an operator: every App
# Service plan, Flex and Linux Consumption included, sets WEBSITE_SITE_NAME and WEBSITE_SKU
# ("FlexConsumption" on Flex), and all but those two Linux plans WEBSITE_INSTANCE_ID; Container Apps
# set CONTAINER_APP_NAME. Core Tools and the dev host set none of them. CONTAINER_NAME, which
# Linux Consumption also sets, is not one: containers elsewhere (a dev container, CI) set it too.
AZURE_MARKERS = ("WEBSITE_INSTANCE_ID", "WEBSITE_SITE_NAME", "WEBSITE_SKU", "CONTAINER_APP_NAME")
# The lowest and highest value of every numeric setting, as text (documented in
# docs/configuration.md). Timeouts: a purchase against a store that never answers waits out a
# dozen storage timeouts and two Brevo ones in series, which must end before Azure's front end
# gives up on an HTTP answer (230 s) and host.json's function timeout (5 minutes). Limits and
# costs: the governance counters and the cost counter in micro-dollars stay well inside a 64-bit
# count. A download link lasts a year at
# most, and a key's replay (30 days at most) plus its lease (a day at most) fits inside it.
BOUNDS: dict[str, tuple[str, str]] = {
    "STOREFRONT_BREVO_TIMEOUT_SECONDS": ("0.1", "30"),
    "STOREFRONT_STORAGE_TIMEOUT_SECONDS": ("0.1", "10"),
    "STOREFRONT_RATE_LIMIT_PER_HOUR": ("1", "1000000"),
    "STOREFRONT_RECIPIENT_LIMIT_PER_DAY": ("1", "1000000"),
    "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR": ("1", "1000000"),
    "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR": ("1", "1000000"),
    "STOREFRONT_DAILY_COST_CEILING_USD": ("0", "1000000"),
    "STOREFRONT_COST_PER_PURCHASE_USD": ("0", "100"),
    "STOREFRONT_COST_COUNTER_SHARDS": ("1", "100"),
    "STOREFRONT_CONTACT_QUEUE_SHARDS": ("1", "32"),
    "BREVO_CONTACT_LIST_ID": ("1", "2147483647"),
    "STOREFRONT_TRUSTED_PROXY_HOPS": ("0", "10"),
    "STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS": ("60", "31536000"),
    "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": ("1", "86400"),
    "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": ("1", "2592000"),
}
_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")
# A queue name's prefix: Azure's queue-name rule (lowercase letters, digits, single hyphens, no
# hyphen at either end) short enough for the longest name made from it, `{prefix}-poison`.
QUEUE_PREFIX = re.compile(r"(?=.{3,56}$)[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]")
# What an HTTP header value can carry as it is (the Brevo key travels in `api-key`).
_HEADER_TOKEN = re.compile(r"[\x21-\x7e]+")


def hosted_on_azure(env: Mapping[str, str]) -> bool:
    """True where the platform's own variables say the app runs on Azure."""
    return any(env.get(name, "").strip() for name in AZURE_MARKERS)


@dataclass(frozen=True)
class Settings:
    storage_connection_string: str = DEVELOPMENT_STORAGE  # "" with an identity-based connection
    storage_table_uri: str = ""
    storage_blob_uri: str = ""
    storage_queue_uri: str = ""
    storage_credential: str = ""  # MANAGED_IDENTITY or DEVELOPER_IDENTITY with service URIs
    storage_client_id: str = ""
    brevo_api_key: str = ""
    brevo_base_url: str = DEFAULT_BREVO_BASE_URL
    brevo_timeout_seconds: float = 10.0
    brevo_contact_list_id: int = 0  # 0: no list, the drainer creates contacts one at a time
    contact_queue: str = "storefront-contacts"  # queues {prefix}-0 .. -{shards - 1}, {prefix}-poison
    contact_queue_shards: int = 4
    rate_limit_per_hour: int = 5
    recipient_limit_per_day: int = 3
    agent_rate_limit_per_hour: int = 0  # a verified agent's hourly limit; 0: rate_limit_per_hour
    agent_site_rate_limit_per_hour: int = 0  # all verified agents of one site; 0: ten agents' limits
    agent_origins_allowed: tuple[str, ...] = ()  # origins whose agents are verified; empty: any
    agent_origins_denied: tuple[str, ...] = ()
    ucp_platforms: tuple[str, ...] = ()  # UCP platforms' profile URLs, pre-approved: never fetched
    daily_cost_ceiling_usd: Decimal = Decimal("5.00")
    cost_per_purchase_usd: Decimal = Decimal("0.01")
    cost_counter_shards: int = 8
    signing_key_pem: str = ""
    hash_secret: str = ""
    sender_email: str = "store@example.com"
    sender_name: str = "Storefront"
    email_template_dir: str = ""  # an operator's checked email templates (absolute); "" for the built-in
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
    ucp_table: str = "ucpcheckouts"
    terms_url: str = ""  # the store's terms of service, linked from every UCP checkout
    privacy_url: str = ""  # its privacy policy, likewise
    retired_public_keys: tuple[dict, ...] = ()
    missing_secrets: tuple[str, ...] = field(default=())
    unresolved_settings: tuple[str, ...] = ()
    hosted_on_azure: bool = False
    weak_secrets: tuple[tuple[str, str], ...] = ()  # (setting, what is wrong), never the value

    @property
    def refused_secrets(self) -> tuple[str, ...]:
        """The public or weak secrets the store refuses: on Azure, all of them; elsewhere none."""
        return tuple(name for name, _ in self.weak_secrets) if self.hosted_on_azure else ()

    @property
    def not_configured(self) -> tuple[str, ...]:
        """Every setting that stops purchases: missing secrets, unresolved references, then
        refused secrets."""
        return tuple(dict.fromkeys(self.missing_secrets + self.unresolved_settings + self.refused_secrets))

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
        r = SettingReader(env, BOUNDS)
        website = env.get("WEBSITE_HOSTNAME", "").strip()
        default_base = f"https://{website}" if website else "http://localhost:7071"
        secrets = _secrets(r)
        missing = tuple(name for name, value in secrets.items() if not value)
        weak = tuple(
            (name, found)
            for name, value in secrets.items()
            if (found := secret_strength.problem(name, value))
        )
        on_azure = hosted_on_azure(env)
        if on_azure:  # a refused secret is never used: it counts as unset
            secrets.update({name: "" for name, _ in weak})
        retired = _retired_keys(r, secrets["STOREFRONT_SIGNING_KEY"], on_azure)
        return cls(  # every value is read before `r.unresolved`, the last argument
            **_storage(r, env),
            brevo_api_key=secrets["BREVO_API_KEY"],
            signing_key_pem=secrets["STOREFRONT_SIGNING_KEY"],
            hash_secret=secrets["STOREFRONT_HASH_SECRET"],
            brevo_base_url=r.url("BREVO_BASE_URL", DEFAULT_BREVO_BASE_URL),
            brevo_timeout_seconds=float(r.decimal("STOREFRONT_BREVO_TIMEOUT_SECONDS", "10")),
            brevo_contact_list_id=r.integer("BREVO_CONTACT_LIST_ID", 0),
            contact_queue=r.name("STOREFRONT_CONTACT_QUEUE", "storefront-contacts", QUEUE_PREFIX),
            contact_queue_shards=r.integer("STOREFRONT_CONTACT_QUEUE_SHARDS", 4),
            rate_limit_per_hour=r.integer("STOREFRONT_RATE_LIMIT_PER_HOUR", 5),
            recipient_limit_per_day=r.integer("STOREFRONT_RECIPIENT_LIMIT_PER_DAY", 3),
            agent_rate_limit_per_hour=r.integer("STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR", 0),
            agent_site_rate_limit_per_hour=r.integer("STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR", 0),
            agent_origins_allowed=r.origins("STOREFRONT_AGENT_ORIGINS_ALLOWED"),
            agent_origins_denied=r.origins("STOREFRONT_AGENT_ORIGINS_DENIED"),
            ucp_platforms=_profile_urls(r, "STOREFRONT_UCP_PLATFORMS"),
            daily_cost_ceiling_usd=r.money("STOREFRONT_DAILY_COST_CEILING_USD", "5.00"),
            cost_per_purchase_usd=r.money("STOREFRONT_COST_PER_PURCHASE_USD", "0.01"),
            cost_counter_shards=r.integer("STOREFRONT_COST_COUNTER_SHARDS", 8),
            sender_email=r.text("STOREFRONT_SENDER_EMAIL", "store@example.com"),
            sender_name=r.text("STOREFRONT_SENDER_NAME", "Storefront"),
            email_template_dir=_email_templates(r),
            public_base_url=r.url("STOREFRONT_PUBLIC_BASE_URL", default_base),
            allowed_origins=r.hosts("STOREFRONT_ALLOWED_ORIGINS"),
            trusted_proxy_hops=r.integer("STOREFRONT_TRUSTED_PROXY_HOPS", 0),
            front_door_id=r.guid("STOREFRONT_FRONT_DOOR_ID"),
            download_token_ttl_seconds=r.integer("STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS", 7 * 24 * 3600),
            storage_timeout_seconds=float(r.decimal("STOREFRONT_STORAGE_TIMEOUT_SECONDS", "5")),
            idempotency_lease_seconds=r.integer("STOREFRONT_IDEMPOTENCY_LEASE_SECONDS", 600),
            idempotency_ttl_seconds=r.integer("STOREFRONT_IDEMPOTENCY_TTL_SECONDS", 24 * 3600),
            idempotency_fail_open=r.boolean("STOREFRONT_IDEMPOTENCY_FAIL_OPEN", False),
            idempotency_table=r.name("STOREFRONT_IDEMPOTENCY_TABLE", "idempotency", TABLE_NAME),
            governance_table=r.name("STOREFRONT_GOVERNANCE_TABLE", "governance", TABLE_NAME),
            receipts_container=r.name("STOREFRONT_RECEIPTS_CONTAINER", "receipts", CONTAINER_NAME),
            bundles_container=r.name("STOREFRONT_BUNDLES_CONTAINER", "bundles", CONTAINER_NAME),
            ledger_table=r.name("STOREFRONT_LEDGER_TABLE", "ledger", TABLE_NAME),
            ucp_table=r.name("STOREFRONT_UCP_TABLE", "ucpcheckouts", TABLE_NAME),
            terms_url=r.optional_url("STOREFRONT_TERMS_URL"),
            privacy_url=r.optional_url("STOREFRONT_PRIVACY_URL"),
            retired_public_keys=retired,
            missing_secrets=missing,
            hosted_on_azure=on_azure,
            weak_secrets=weak,
            unresolved_settings=tuple(r.unresolved),
        )


def _profile_urls(r: SettingReader, name: str) -> tuple[str, ...]:
    """Profile URLs (`https://platform.example/profile`), comma-separated, each in its canonical
    form, the form a UCP-Agent header's URL is compared in."""
    urls = []
    for entry in filter(None, (part.strip() for part in r.raw(name).split(","))):
        try:
            urls.append(canonical_url(entry, ("https", "http")))
        except ValueError as exc:
            raise SettingsError(f"{name} must list profile URLs, comma-separated: {exc}") from None
    return tuple(dict.fromkeys(urls))


def _secrets(r: SettingReader) -> dict[str, str]:
    """The three secrets as the app uses them (the signing key's `\\n` escapes made line breaks).
    A signing key that is no single EC P-256 private key, and a Brevo key an HTTP header cannot
    carry, are refused here, naming the setting and not the value."""
    secrets = {name: r.text(name, "") for name in SECRET_SETTINGS}
    secrets["STOREFRONT_SIGNING_KEY"] = secrets["STOREFRONT_SIGNING_KEY"].replace("\\n", "\n")
    if secrets["BREVO_API_KEY"] and not _HEADER_TOKEN.fullmatch(secrets["BREVO_API_KEY"]):
        raise SettingsError(
            "BREVO_API_KEY must be printable ASCII without spaces: Brevo takes it in an HTTP header"
        )
    if secrets["STOREFRONT_SIGNING_KEY"]:
        try:
            load_private_key(secrets["STOREFRONT_SIGNING_KEY"])
        except NotConfigured as exc:
            raise SettingsError(exc.message) from None
    return secrets


def _retired_keys(r: SettingReader, signing_pem: str, on_azure: bool) -> tuple[dict, ...]:
    """The retired public keys, each named once in the JWKS beside the current key: a key listed
    twice, or the current key listed as retired (a rotation that kept the new key's half, not the
    old one's), stops the start; so does, on Azure, the example's key, which anyone can sign with."""
    retired = r.jwks(RETIRED_KEYS)
    kids = [thumbprint(jwk) for jwk in retired]
    if signing_pem and public_jwk(load_private_key(signing_pem))["kid"] in kids:
        raise SettingsError(
            f"{RETIRED_KEYS} lists the current STOREFRONT_SIGNING_KEY: list only the keys it replaced"
        )
    if len(set(kids)) != len(kids):
        raise SettingsError(f"{RETIRED_KEYS} lists one key twice (the same RFC 7638 thumbprint)")
    if on_azure and secret_strength.PUBLISHED_SIGNING_KEYS & set(kids):
        raise SettingsError(
            f"{RETIRED_KEYS} lists the public development key from {secret_strength.EXAMPLE_FILE}, "
            "which anyone can sign with"
        )
    return retired


def _email_templates(r: SettingReader) -> str:
    """An operator's email template folder, as given: `shared.runtime.load_settings` checks that
    every template in it renders an email that carries the download link, at start-up."""
    return r.text(EMAIL_TEMPLATE_DIR, "")


class _StorageFields(TypedDict, total=False):
    storage_connection_string: str
    storage_table_uri: str
    storage_blob_uri: str
    storage_queue_uri: str
    storage_credential: str
    storage_client_id: str


def _storage(r: SettingReader, env: Mapping[str, str]) -> _StorageFields:
    """The storage fields: a connection string, or service URIs with the credential to use."""
    connection = r.text(STORAGE, "")
    given = {name.removeprefix(f"{STORAGE}__"): r.text(name, "") for name in IDENTITY_SETTINGS}
    identity = [f"{STORAGE}__{name}" for name, value in given.items() if value]
    account, credential, client_id = given["accountName"], given["credential"], given["clientId"]
    if not identity:
        return _StorageFields(storage_connection_string=connection or DEVELOPMENT_STORAGE)
    if connection:
        raise SettingsError(
            f"{STORAGE} (a connection string) and {identity[0]} (an identity-based connection) are both "
            f"set: keep the identity settings on Azure, or only {STORAGE} locally (Azurite)"
        )
    if account and not _ACCOUNT_NAME.fullmatch(account):
        raise SettingsError(f"{STORAGE}__accountName must be 3 to 24 lowercase letters and digits")
    if credential and credential.lower() != "managedidentity":
        raise SettingsError(f"{STORAGE}__credential must be managedidentity when set")
    if client_id:
        client_id = canonical_guid(client_id) or ""
        if not client_id:
            raise SettingsError(f"{STORAGE}__clientId must be the managed identity's client id (a GUID)")
    on_platform = bool(env.get("IDENTITY_ENDPOINT", "").strip())
    return _StorageFields(
        storage_connection_string="",
        storage_table_uri=_service_uri("tableServiceUri", given, "table"),
        storage_blob_uri=_service_uri("blobServiceUri", given, "blob"),
        storage_queue_uri=_service_uri("queueServiceUri", given, "queue"),
        storage_credential=MANAGED_IDENTITY if credential or on_platform else DEVELOPER_IDENTITY,
        storage_client_id=client_id,
    )


def _service_uri(key: str, given: dict[str, str], service: str) -> str:
    """The service's URI as given, in its canonical form, else derived from the account name.
    Tokens go over TLS only, and a query string could carry a SAS: neither is accepted (the value
    is not echoed)."""
    name, uri, account = f"{STORAGE}__{key}", given[key], given["accountName"]
    if not uri:
        if not account:
            raise SettingsError(
                f"{name} (or {STORAGE}__accountName) must be set for an identity-based connection: "
                f"the app keeps its state in {service} storage"
            )
        return f"https://{account}.{service}.core.windows.net"
    try:
        return canonical_url(uri, ("https",))
    except ValueError as exc:
        raise SettingsError(f"{name} must be an https:// URL with no query string: {exc}") from None

"""The process-wide services, built on first use from the settings and reused by every
invocation. Building opens no connection; clients connect when first called. With an
identity-based storage connection, one credential (and so one token cache) serves every client.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace

from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.config.sealing import Sealer
from shared.config.settings import EMAIL_TEMPLATE_DIR, Settings
from shared.config.settings_reader import SettingsError
from shared.exactly_once.idempotency import IdempotencyHandler
from shared.protocols.agents import AgentPolicy, AgentVerifier
from shared.protocols.api import Services
from shared.protocols.downloads import Downloads
from shared.protocols.ucp.checkout import legal_links
from shared.protocols.ucp.negotiation import MAX_PROFILE_BYTES, Platforms, pre_approved
from shared.protocols.ucp.replay import Replays
from shared.protocols.ucp.sessions import CheckoutSessions
from shared.protocols.ucp.webhooks import Webhooks
from shared.purchase.call import StoreConfig
from shared.purchase.catalog import BUNDLES
from shared.purchase.contacts import LEASE_SECONDS, ContactDrainer
from shared.purchase.governance import Governance, Limits
from shared.purchase.storefront import Storefront
from shared.seams.brevo import BrevoClient
from shared.seams.bundle_files import BlobBundleFiles
from shared.seams.card_dates import TIMEOUT_SECONDS as CARD_DATE_SECONDS
from shared.seams.card_dates import TableCardDates
from shared.seams.checkout_store import PURPOSE as CHECKOUT_PURPOSE
from shared.seams.checkout_store import CheckoutStore
from shared.seams.claims import TableClaimStore
from shared.seams.contact_queue import open_queue
from shared.seams.counters import TableCounters
from shared.seams.key_directory import KeyDirectories
from shared.seams.lease import TableLease
from shared.seams.ledger import TableLedger
from shared.seams.public_fetch import PublicFetcher
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import Account, Transports, container_client, identity_credential, table_client
from shared.seams.storage_probe import StorageProbe

DRAINER_LEASE = "contact-drainer"

# The Azure SDK logs every request's headers at INFO; keep the function's log to what matters.
logging.getLogger("azure").setLevel(logging.WARNING)
log = logging.getLogger(__name__)

# The account of Azurite's development storage (UseDevelopmentStorage=true), which make run uses.
DEVELOPMENT_ACCOUNT = "devstoreaccount1"
_lock = threading.Lock()
_services: Services | None = None
_settings: Settings | None = None


def settings() -> Settings:
    """The settings, read once; function_app reads them at start-up, which is when an
    unresolved Key Vault reference or a refused secret is logged, and a public or weak secret
    off Azure is warned of (by setting name only)."""
    global _settings
    if _settings is None:
        _settings = load_settings()
        report_settings(_settings)
    return _settings


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings from `env` (default: the process's), with an operator's email templates
    checked by the purchase's own email rules: a template that would send an email without the
    download link stops the start, never a purchase."""
    s = Settings.from_env(env)
    if not s.email_template_dir:
        return s
    from shared.purchase import emails  # Jinja2 is imported only when there are templates to check

    try:
        return replace(s, email_template_dir=emails.check_folder(s.email_template_dir))
    except emails.TemplateProblem as exc:
        raise SettingsError(f"{EMAIL_TEMPLATE_DIR}: {exc}") from None


def report_settings(s: Settings) -> None:
    """Log each setting that stops purchases, and once the public or weak secrets a developer
    machine may use; never a value."""
    for name in s.unresolved_settings:
        log.error("%s is an unresolved Key Vault reference; purchases are refused until it resolves", name)
    for name, problem in s.weak_secrets:
        if name in s.refused_secrets:
            log.error("%s; on Azure purchases are refused until it is replaced", problem)
    if s.weak_secrets and not s.hosted_on_azure:
        log.warning(
            "%s: public or weak values, fine on this machine; on Azure the store refuses them "
            "(docs/deploying.md#secrets-the-app-refuses)",
            ", ".join(name for name, _ in s.weak_secrets),
        )


def services() -> Services:
    global _services
    if _services is None:
        with _lock:
            if _services is None:
                _services = build(settings())
    return _services


def build(s: Settings, transport: Transports | None = None) -> Services:
    """Every client from the settings. `transport(kind)`, for "table", "blob" or "queue", gives
    each storage client its transport (the benchmark counts round trips there); default: the SDK's."""
    hasher = Hasher(s.hash_secret)
    account, timeout = storage_account(s), s.storage_timeout_seconds

    def table(name: str, seconds: float = timeout):
        return table_client(account, name, seconds, transport("table") if transport else None)

    def container(name: str):
        return container_client(account, name, timeout, transport("blob") if transport else None)

    receipts = BlobReceiptStore(container(s.receipts_container))
    ledger = TableLedger(table(s.ledger_table))
    keys = keyset(s)
    brevo = BrevoClient.connect(s.brevo_base_url, s.brevo_api_key, s.brevo_timeout_seconds)
    contacts = open_queue(
        account,
        s.contact_queue,
        s.contact_queue_shards,
        s.hash_secret,
        timeout,
        transport("queue") if transport else None,
    )
    storefront = Storefront(
        StoreConfig(
            public_base_url=s.public_base_url,
            sender_email=s.sender_email,
            sender_name=s.sender_name,
            download_token_ttl_seconds=s.download_token_ttl_seconds,
            missing_secrets=s.not_configured,
            idempotency_fail_open=s.idempotency_fail_open,
            email_template_dir=s.email_template_dir,
        ),
        hasher=hasher,
        idempotency=IdempotencyHandler(
            TableClaimStore(table(s.idempotency_table)),
            receipts,
            lease_seconds=s.idempotency_lease_seconds,
            ttl_seconds=s.idempotency_ttl_seconds,
        ),
        governance=Governance(
            TableCounters(table(s.governance_table)),
            hasher,
            Limits(
                s.rate_limit_per_hour,
                s.daily_cost_ceiling_usd,
                s.cost_per_purchase_usd,
                s.cost_counter_shards,
                recipient_limit_per_day=s.recipient_limit_per_day,
                agent_rate_limit_per_hour=s.agent_rate_limit_per_hour or None,
                agent_site_rate_limit_per_hour=s.agent_site_rate_limit_per_hour or None,
            ),
            local=counters_in_make_run(s),
        ),
        receipts=receipts,
        brevo=brevo,
        keys=keys,
        ledger=ledger,
        repairs=RepairQueue(table(s.ledger_table)),
        contacts=contacts,
    )
    bundle_files = BlobBundleFiles(container(s.bundles_container))
    downloads = Downloads(keys, bundle_files, s.public_base_url)
    probe = StorageProbe(
        table(s.idempotency_table),
        container(s.receipts_container),
        timeout,
        account.credential,
        backlog=contacts.backlog,
        missing_bundles=lambda **options: bundle_files.missing(BUNDLES, **options),
    )
    lease = TableLease(table(s.governance_table), DRAINER_LEASE, LEASE_SECONDS)
    drainer = ContactDrainer(contacts, brevo, lease, s.brevo_contact_list_id)
    agents = AgentVerifier(
        KeyDirectories(local=not s.hosted_on_azure),
        TableCounters(table(s.governance_table)),
        hasher,
        AgentPolicy(s.agent_origins_allowed, s.agent_origins_denied, local=not s.hosted_on_azure),
    )
    platforms = Platforms(
        {url: pre_approved() for url in s.ucp_platforms},
        PublicFetcher(local=not s.hosted_on_azure, timeout=3.0, max_bytes=MAX_PROFILE_BYTES),
        local=not s.hosted_on_azure,
    )
    checkout_store = CheckoutStore(table(s.ucp_table), Sealer(s.hash_secret, CHECKOUT_PURPOSE))
    webhooks = Webhooks(
        checkout_store,
        PublicFetcher(local=not s.hosted_on_azure, timeout=5.0, max_bytes=64 * 1024),
        keys,
        s.public_base_url.rstrip("/") + "/.well-known/ucp",
    )
    return Services(
        settings=s,
        agents=agents,
        platforms=platforms,
        webhooks=webhooks,
        checkouts=CheckoutSessions(
            checkout_store,
            storefront,
            hasher,
            webhooks=webhooks,
            resume_within=max(0, s.idempotency_ttl_seconds - s.idempotency_lease_seconds),
            links=legal_links(s.terms_url, s.privacy_url),
        ),
        replays=Replays(checkout_store, hasher, lease_seconds=s.idempotency_lease_seconds),
        storefront=storefront,
        downloads=downloads,
        ledger=ledger,
        keys=keys,
        storage=probe,
        drainer=drainer,
        card_dates=TableCardDates(
            table(s.governance_table, min(timeout, CARD_DATE_SECONDS)), s.public_base_url
        ),
    )


def counters_in_make_run(s: Settings) -> bool:
    """Whether the limits' counters are where `make run` keeps them, so that `make reset` clears
    them: off Azure, in Azurite's development account, named by a connection string. Not in a
    storage account of their own (reached over an identity, or with its own key), off Azure too."""
    pairs = dict(part.partition("=")[::2] for part in s.storage_connection_string.split(";"))
    fields = {key.strip().lower(): value.strip() for key, value in pairs.items()}
    development = fields.get("usedevelopmentstorage", "").lower() == "true"
    return not s.hosted_on_azure and (development or fields.get("accountname") == DEVELOPMENT_ACCOUNT)


def storage_account(s: Settings) -> Account:
    """The storage the settings name; with service URIs, the credential is made here, once."""
    if s.storage_connection_string:
        return Account(connection_string=s.storage_connection_string)
    return Account(
        table_uri=s.storage_table_uri,
        blob_uri=s.storage_blob_uri,
        queue_uri=s.storage_queue_uri,
        credential=identity_credential(s.storage_credential, s.storage_client_id, s.storage_timeout_seconds),
    )


def keyset(s: Settings) -> Callable[[], KeySet]:
    """The signing keys, loaded on first use; until STOREFRONT_SIGNING_KEY is usable, every call
    raises NotConfigured again (a failure is not cached)."""
    return functools.cache(lambda: KeySet.load(s.signing_key_pem, s.retired_public_keys))

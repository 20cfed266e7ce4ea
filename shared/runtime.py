"""The process-wide storefront, built on first use from the settings and reused by every
invocation. Building opens no connection; clients connect when first called.
"""

from __future__ import annotations

import functools
import logging
import threading

import requests

from shared.brevo import BrevoClient
from shared.governance import Governance, Limits
from shared.hashing import Hasher
from shared.idempotency import IdempotencyHandler
from shared.idempotency_table import TableIdempotencyStore
from shared.purchase import StoreConfig, Storefront
from shared.receipts import BlobReceiptStore
from shared.settings import Settings
from shared.storage import container_client, table_client
from shared.tokens import TokenSigner

# The Azure SDK logs every request's headers at INFO; keep the function's log to what matters.
logging.getLogger("azure").setLevel(logging.WARNING)

_lock = threading.Lock()
_storefront: Storefront | None = None
_settings: Settings | None = None


def settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = Settings.from_env()
    return _settings


def storefront() -> Storefront:
    global _storefront
    if _storefront is None:
        with _lock:
            if _storefront is None:
                _storefront = build_storefront(settings())
    return _storefront


def build_storefront(s: Settings) -> Storefront:
    hasher = Hasher(s.hash_secret)
    conn, timeout = s.storage_connection_string, s.storage_timeout_seconds
    receipts = BlobReceiptStore(container_client(conn, s.receipts_container, timeout))
    brevo = BrevoClient(requests.Session(), s.brevo_base_url, s.brevo_api_key, s.brevo_timeout_seconds)
    return Storefront(
        StoreConfig(
            public_base_url=s.public_base_url,
            sender_email=s.sender_email,
            sender_name=s.sender_name,
            missing_secrets=s.missing_secrets,
        ),
        hasher=hasher,
        idempotency=IdempotencyHandler(
            TableIdempotencyStore(table_client(conn, s.idempotency_table, timeout)),
            receipts,
            lease_seconds=s.idempotency_lease_seconds,
            ttl_seconds=s.idempotency_ttl_seconds,
        ),
        governance=Governance(
            table_client(conn, s.governance_table, timeout),
            hasher,
            Limits(s.rate_limit_per_hour, s.daily_cost_ceiling_usd, s.cost_per_purchase_usd),
        ),
        receipts=receipts,
        brevo=brevo,
        signer=functools.cache(
            lambda: TokenSigner(s.signing_key_pem, s.public_base_url, s.download_token_ttl_seconds)
        ),
    )

"""The seam to Azure Storage: clients built from a connection string or from service URIs and
the app's identity, and the one place that decides which storage errors are outages (fail open)
and which are answers (exists, not found, modified) that the callers act on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from azure.core import MatchConditions
from azure.core.credentials import AccessToken, TokenCredential
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.core.pipeline.transport import HttpTransport
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient, ExponentialRetry
from azure.storage.queue import ExponentialRetry as QueueRetry
from azure.storage.queue import QueueClient

from shared.config.errors import StorageOutage
from shared.config.settings import MANAGED_IDENTITY

ANSWERS = (ResourceExistsError, ResourceNotFoundError, ResourceModifiedError)
STORAGE_SCOPE = "https://storage.azure.com/.default"
T = TypeVar("T")
# A transport for each kind of client ("table", "blob", "queue"), in place of the SDK's own: the
# benchmark counts round trips there.
Transports = Callable[[str], HttpTransport]


@dataclass(frozen=True)
class Account:
    """Where the app's tables, blobs and queues are and how it signs in: a connection string
    (Azurite, local), or service URIs with a token credential (the managed identity on Azure)."""

    connection_string: str = ""
    table_uri: str = ""
    blob_uri: str = ""
    queue_uri: str = ""
    credential: TokenCredential | None = None


def identity_credential(kind: str, client_id: str = "", timeout: float = 5.0) -> TokenCredential:
    """The credential named by the settings (`MANAGED_IDENTITY` or `DEVELOPER_IDENTITY`), held to
    the storage timeout (the identity client's own default waits and retries for a minute, inside
    every storage call that needs a fresh token). azure.identity is imported here, only when an
    identity-based connection is used: it adds about 160 ms to every cold start otherwise."""
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    bounded: dict[str, Any] = {"connection_timeout": timeout, "read_timeout": timeout, "retry_total": 1}
    if kind == MANAGED_IDENTITY:
        return _Guarded(ManagedIdentityCredential(client_id=client_id or None, **bounded))
    return _Guarded(DefaultAzureCredential(managed_identity_client_id=client_id or None, **bounded))


class _Closable(TokenCredential, Protocol):
    def close(self) -> None: ...


class _Guarded:
    """A token credential whose every failure is an `AzureError`: an identity endpoint that
    answers garbage (a body that is not JSON, say) would otherwise raise past the one outage
    rule of this module, and a purchase would end in a 500 instead of a 503."""

    def __init__(self, credential: _Closable):
        self._credential = credential

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        try:
            return self._credential.get_token(*scopes, **kwargs)
        except AzureError:
            raise
        except Exception as exc:
            raise ClientAuthenticationError(
                f"no token from the app's identity ({type(exc).__name__})"
            ) from None

    def close(self) -> None:
        self._credential.close()


def _account(account: str | Account) -> Account:
    return Account(connection_string=account) if isinstance(account, str) else account


def table_client(
    account: str | Account, table_name: str, timeout: float, transport: HttpTransport | None = None
) -> TableClient:
    """`account` is a connection string or an Account. `transport` replaces the SDK's own (the
    benchmark counts round trips there)."""
    account = _account(account)
    options: dict[str, Any] = {
        "table_name": table_name,
        "retry_total": 1,
        "connection_timeout": timeout,
        "read_timeout": timeout,
        **({"transport": transport} if transport else {}),
    }
    if account.credential is None:
        return TableClient.from_connection_string(account.connection_string, **options)
    return TableClient(endpoint=account.table_uri, credential=account.credential, **options)


def container_client(
    account: str | Account, container: str, timeout: float, transport: HttpTransport | None = None
) -> ContainerClient:
    account = _account(account)
    options: dict[str, Any] = {
        "container_name": container,
        # The Blob SDK's default retry waits 15 s (±3) before its first retry; keep outages short.
        "retry_policy": ExponentialRetry(
            initial_backoff=0.2,  # type: ignore[arg-type]  # typed int; slept as float seconds
            increment_base=2,
            retry_total=1,
            random_jitter_range=0.1,  # type: ignore[arg-type]
        ),
        "connection_timeout": timeout,
        "read_timeout": timeout,
        **({"transport": transport} if transport else {}),
    }
    if account.credential is None:
        return ContainerClient.from_connection_string(account.connection_string, **options)
    return ContainerClient(account_url=account.blob_uri, credential=account.credential, **options)


def queue_client(
    account: str | Account, queue: str, timeout: float, transport: HttpTransport | None = None
) -> QueueClient:
    """A client of one queue; messages are plain text (the store seals what it puts there)."""
    account = _account(account)
    options: dict[str, Any] = {
        "queue_name": queue,
        # The Queue SDK's default retry, like Blob's, waits 15 s (±3) before its first retry.
        "retry_policy": QueueRetry(
            initial_backoff=0.2,  # type: ignore[arg-type]  # typed int; slept as float seconds
            increment_base=2,
            retry_total=1,
            random_jitter_range=0.1,  # type: ignore[arg-type]
        ),
        "connection_timeout": timeout,
        "read_timeout": timeout,
        **({"transport": transport} if transport else {}),
    }
    if account.credential is None:
        return QueueClient.from_connection_string(account.connection_string, **options)
    return QueueClient(account_url=account.queue_uri, credential=account.credential, **options)


def check(what: str, call: Callable[..., object], identity: bool) -> str | None:
    """Run one cheap call that proves a store answers and accepts the app's credentials: None,
    or what went wrong, in words safe to show anyone (no secret, no address). A missing table,
    container or entity is an answer, so it passes."""
    try:
        call(retry_total=0)
    except ResourceNotFoundError:
        return None
    except ClientAuthenticationError as exc:
        if exc.response is None:
            return f"{what}: the app's identity got no token ({type(exc).__name__})"
        credentials = "identity" if identity else "account key"
        return f"{what} refused the app's {credentials} ({exc.status_code})"
    except HttpResponseError as exc:
        return f"{what} answered {exc.status_code}" if exc.status_code else f"{what} unreachable"
    except AzureError as exc:
        return f"{what} unreachable ({type(exc).__name__})"
    return None


def is_missing_table(exc: BaseException) -> bool:
    return isinstance(exc, ResourceNotFoundError) and _error_code(exc) == "TableNotFound"


def is_missing_container(exc: BaseException) -> bool:
    return isinstance(exc, ResourceNotFoundError) and _error_code(exc) == "ContainerNotFound"


def is_missing_queue(exc: BaseException) -> bool:
    return isinstance(exc, ResourceNotFoundError) and _error_code(exc) == "QueueNotFound"


def is_gone_message(exc: BaseException) -> bool:
    """A queue message deleted already, or received again by someone else since (its pop
    receipt no longer matches)."""
    if isinstance(exc, ResourceNotFoundError) and not is_missing_queue(exc):
        return True
    return isinstance(exc, HttpResponseError) and _error_code(exc) == "PopReceiptMismatch"


def _error_code(exc: BaseException) -> str:
    """The service's error code; the SDKs give it as a string or as an enum, depending on the call."""
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)
    if code:
        return str(code)
    words = ("TableNotFound", "ContainerNotFound", "QueueNotFound")
    return next((word for word in words if word in str(exc)), "")


def outage(exc: AzureError, what: str) -> StorageOutage:
    return StorageOutage(f"{what} unavailable: {type(exc).__name__}")


def on_table(table: TableClient, what: str, operation: Callable[[], T]) -> T:
    """Run one table operation. A missing table is created and the operation run once more;
    the conditional answers (exists, modified, entity not found) reach the caller unchanged;
    anything else is an outage."""
    for _ in range(2):
        try:
            return operation()
        except ResourceNotFoundError as exc:
            if not is_missing_table(exc):
                raise
            create_table(table)
        except ANSWERS:
            raise
        except AzureError as exc:
            raise outage(exc, what) from exc
    raise StorageOutage(f"{what} could not be created")


def create_table(table: TableClient) -> None:
    """Create a table that turned out to be missing; a concurrent creator is not an error."""
    try:
        table.create_table()
    except ResourceExistsError:
        pass
    except AzureError as exc:
        raise outage(exc, "table storage") from exc


def delete_past(table: TableClient, what: str, field: str, now: float) -> int:
    """Delete every entity whose `field` (a time) is before `now`; the number deleted. One
    written again since it was read keeps its new time (ETag); a missing table holds nothing."""
    removed = 0
    try:
        past = list(
            table.query_entities(
                f"{field} lt @now", parameters={"now": float(now)}, select=["PartitionKey", "RowKey"]
            )
        )
    except ResourceNotFoundError:
        return 0
    except AzureError as exc:
        raise outage(exc, what) from exc
    for entity in past:
        try:
            table.delete_entity(
                entity["PartitionKey"],
                entity["RowKey"],
                etag=entity.metadata["etag"],
                match_condition=MatchConditions.IfNotModified,
            )
            removed += 1
        except ResourceModifiedError:
            continue
        except AzureError as exc:
            raise outage(exc, what) from exc
    return removed

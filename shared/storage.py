"""The seam to Azure Storage: clients built from one connection string, and the one place that
decides which storage errors are outages (fail open) and which are answers (exists, not found,
modified) that the callers act on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from azure.core.exceptions import (
    AzureError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.core.pipeline.transport import HttpTransport
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient, ExponentialRetry

from shared.errors import StoreUnavailable

ANSWERS = (ResourceExistsError, ResourceNotFoundError, ResourceModifiedError)
T = TypeVar("T")


def table_client(
    connection_string: str, table_name: str, timeout: float, transport: HttpTransport | None = None
) -> TableClient:
    """`transport` replaces the SDK's own (the benchmark counts round trips there)."""
    return TableClient.from_connection_string(
        connection_string,
        table_name=table_name,
        retry_total=1,
        connection_timeout=timeout,
        read_timeout=timeout,
        **({"transport": transport} if transport else {}),
    )


def container_client(
    connection_string: str, container: str, timeout: float, transport: HttpTransport | None = None
) -> ContainerClient:
    # The Blob SDK's default retry waits 15 s (±3) before its first retry; keep outages short.
    return ContainerClient.from_connection_string(
        connection_string,
        container_name=container,
        retry_policy=ExponentialRetry(
            initial_backoff=0.2, increment_base=2, retry_total=1, random_jitter_range=0.1
        ),
        connection_timeout=timeout,
        read_timeout=timeout,
        **({"transport": transport} if transport else {}),
    )


def is_missing_table(exc: BaseException) -> bool:
    return isinstance(exc, ResourceNotFoundError) and _error_code(exc) == "TableNotFound"


def is_missing_container(exc: BaseException) -> bool:
    return isinstance(exc, ResourceNotFoundError) and _error_code(exc) == "ContainerNotFound"


def _error_code(exc: BaseException) -> str:
    """The service's error code; the SDKs give it as a string or as an enum, depending on the call."""
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)
    if code:
        return str(code)
    return next((word for word in ("TableNotFound", "ContainerNotFound") if word in str(exc)), "")


def outage(exc: AzureError, what: str) -> StoreUnavailable:
    return StoreUnavailable(f"{what} unavailable: {type(exc).__name__}")


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
    raise StoreUnavailable(f"{what} could not be created")


def create_table(table: TableClient) -> None:
    """Create a table that turned out to be missing; a concurrent creator is not an error."""
    try:
        table.create_table()
    except ResourceExistsError:
        pass
    except AzureError as exc:
        raise outage(exc, "table storage") from exc

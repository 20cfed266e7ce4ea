"""Receipts in Blob storage: write-once blobs, served back byte for byte, tagged until the ledger
holds them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient, ContentSettings

from shared.config.errors import StorageOutage
from shared.seams.storage import is_missing_container, outage

T = TypeVar("T")


LEDGER_TAG = "ledger_day"


class BlobReceiptStore:
    """Receipts as write-once blobs named `<receipt_id>.json` in one container.

    A receipt is written with the blob index tag `ledger_day=<its UTC day>`, in the same call, and
    keeps it until the repair timer has seen its ledger row: a receipt whose ledger row was never
    written (the Table was down, or the host died between the two writes) is found by that tag.
    Only the day is in the tag; nothing about the buyer."""

    def __init__(self, container: ContainerClient):
        self._container = container

    def write(self, receipt_id: str, body: bytes, *, ledger_day: str | None = None) -> bool:
        """Store the receipt once; False when a receipt with this id already exists. With
        `ledger_day`, the blob is tagged as awaiting its ledger row on that day."""
        tags = {LEDGER_TAG: ledger_day} if ledger_day else None
        for _ in range(2):
            try:
                self._container.upload_blob(
                    f"{receipt_id}.json",
                    body,
                    overwrite=False,
                    tags=tags,
                    content_settings=ContentSettings(content_type="application/json"),
                )
                return True
            except ResourceExistsError:
                return False
            except ResourceNotFoundError as exc:
                if not is_missing_container(exc):
                    raise outage(exc, "blob storage") from exc
                self._create_container()
            except AzureError as exc:
                raise outage(exc, "blob storage") from exc
        raise StorageOutage("receipts container could not be created")

    def write_once(self, receipt_id: str, body: bytes, *, ledger_day: str | None = None) -> bytes:
        """The bytes on record under this id: `body`, or those an earlier writer stored first
        (they win: a receipt is never replaced)."""
        if self.write(receipt_id, body, ledger_day=ledger_day):
            return body
        return self.read(receipt_id) or body

    def read(self, receipt_id: str) -> bytes | None:
        return self._call(lambda: self._container.download_blob(f"{receipt_id}.json").readall())

    def probe(self) -> None:
        """One cheap call that proves Blob answers (a missing container is an answer too)."""
        self._call(self._container.get_container_properties)

    def awaiting_ledger(self) -> Iterator[tuple[str, str]]:
        """(receipt id, ledger day) of each receipt still tagged as awaiting its ledger row, page
        by page as Blob's tag index returns them. Raises StorageOutage as it goes."""
        query = f"\"{LEDGER_TAG}\" >= '0'"
        try:
            for blob in self._container.find_blobs_by_tags(query):
                if blob.name.endswith(".json") and blob.tags:
                    yield blob.name.removesuffix(".json"), blob.tags.get(LEDGER_TAG, "")
        except ResourceNotFoundError:
            return
        except AzureError as exc:
            raise outage(exc, "blob storage") from exc

    def ledger_recorded(self, receipt_id: str) -> None:
        """The receipt's ledger row exists: drop the tag."""
        self._call(lambda: self._container.get_blob_client(f"{receipt_id}.json").set_blob_tags({}))

    def _call(self, operation: Callable[[], T]) -> T | None:
        """One Blob call: a missing blob or container is None, anything else an outage."""
        try:
            return operation()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, "blob storage") from exc

    def _create_container(self) -> None:
        try:
            self._container.create_container()
        except ResourceExistsError:
            pass
        except AzureError as exc:
            raise outage(exc, "blob storage") from exc

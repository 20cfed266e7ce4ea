"""The bundles' files in Blob storage: `{bundle id}.zip` in the bundles container, read whole
when a download link is redeemed (`shared.protocols.downloads`), and looked for, one existence
check a bundle, by the health probe (`shared.seams.storage_probe`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from shared.seams.storage import outage


class BlobBundleFiles:
    def __init__(self, container: ContainerClient):
        self._container = container

    def read(self, bundle_id: str) -> bytes | None:
        """The bundle's file, or None when none is uploaded; `StorageOutage` when Blob fails."""
        try:
            return self._container.download_blob(f"{bundle_id}.zip").readall()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, "blob storage") from exc

    def missing(self, bundle_ids: Iterable[str], **options: Any) -> list[str]:
        """The bundles without a file (a missing container counts as every file missing), one
        HEAD a bundle; `StorageOutage` when Blob fails, so an outage never reads as a missing file."""
        try:
            return [
                bundle_id
                for bundle_id in bundle_ids
                if not self._container.get_blob_client(f"{bundle_id}.zip").exists(**options)
            ]
        except AzureError as exc:
            raise outage(exc, "blob storage") from exc

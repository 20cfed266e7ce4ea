"""The bundles' files in Blob storage: `{bundle id}.zip` in the bundles container, read whole
when a download link is redeemed (`shared.protocols.downloads`)."""

from __future__ import annotations

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

"""Put a sample file for every catalog bundle into Blob storage, so the download link in a
sandbox email fetches a real file. `make run` calls it; tests call `seed()` directly.

    python -m devstack.seed_bundles [--connection-string CS] [--container NAME]

Without options it uses AzureWebJobsStorage and STOREFRONT_BUNDLES_CONTAINER from the
environment, then local.settings.json (or its .example), as the Functions host would.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import zipfile
from pathlib import Path

from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import ContainerClient, ContentSettings

from devstack.devhost import read_settings
from shared.catalog import BUNDLES, Bundle

ROOT = Path(__file__).resolve().parent.parent


def sample_bundle(bundle: Bundle) -> bytes:
    """A small, deterministic zip: the same bytes on every run, so tests can compare them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (
            ("README.md", f"# {bundle.title}\n\n{bundle.description}\n"),
            ("LICENSE.txt", "Free to use and share.\n"),
        ):
            info = zipfile.ZipInfo(f"{bundle.id}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            archive.writestr(info, text)
    return buffer.getvalue()


def seed(connection_string: str, container: str = "bundles") -> list[str]:
    client = ContainerClient.from_connection_string(connection_string, container)
    with contextlib.suppress(ResourceExistsError):
        client.create_container()
    names = []
    for bundle in BUNDLES.values():
        name = f"{bundle.id}.zip"
        client.upload_blob(
            name,
            sample_bundle(bundle),
            overwrite=True,
            content_settings=ContentSettings(content_type="application/zip"),
        )
        names.append(name)
    return names


def main(argv: list[str] | None = None) -> int:
    settings = {**read_settings(ROOT), **os.environ}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connection-string", default=settings.get("AzureWebJobsStorage", ""))
    parser.add_argument("--container", default=settings.get("STOREFRONT_BUNDLES_CONTAINER", "bundles"))
    args = parser.parse_args(argv)
    if not args.connection_string:
        print("no storage connection string: set AzureWebJobsStorage", file=sys.stderr)
        return 2
    for name in seed(args.connection_string, args.container):
        print(f"seeded {args.container}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Put a file for every catalog bundle into Blob storage, so the download link in a sandbox email
fetches a real file: a small sample zip, or your own file for a bundle you are adding. `make run`
seeds the samples; tests call `seed()` and `upload()` directly.

    python -m devstack.seed_bundles [--connection-string CS] [--container NAME]
    python -m devstack.seed_bundles --file BUNDLE_ID=PATH [--file ...]

Samples never replace your own files. Which storage it writes to, and what `--file` refuses:
docs/development.md#your-own-bundle-locally.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import zipfile
from pathlib import Path

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient, ContentSettings, LinearRetry

from devstack.devhost.settings import read_settings
from shared.purchase.catalog import BUNDLES, Bundle

ROOT = Path(__file__).resolve().parent.parent
# The host reads a bundle whole into memory for every download (shared/protocols/downloads.py).
MAX_FILE_BYTES = 100 * 1024 * 1024
SAMPLE = {"storefront_sample": "true"}  # marks a blob as ours to overwrite; your own file has none
ZIP = ContentSettings(content_type="application/zip")


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


def _container(connection_string: str, container: str) -> ContainerClient:
    # A few quick retries, not the SDK's minute of them: a local Azurite is up or it is not. The SDK
    # annotates backoff as whole seconds, but sleeps a fraction of one as well.
    retry = LinearRetry(backoff=0.5, random_jitter_range=0, retry_total=3)  # type: ignore[arg-type]
    client = ContainerClient.from_connection_string(connection_string, container, retry_policy=retry)
    with contextlib.suppress(ResourceExistsError):
        client.create_container()
    return client


def _own_file(client: ContainerClient, name: str) -> bool:
    try:
        metadata = client.get_blob_client(name).get_blob_properties().metadata
    except ResourceNotFoundError:
        return False
    return not SAMPLE.items() <= metadata.items()


def seed(connection_string: str, container: str = "bundles") -> list[str]:
    """Write the sample of every bundle without a file of its own; the blob names written."""
    client = _container(connection_string, container)
    names = []
    for bundle in BUNDLES.values():
        name = f"{bundle.id}.zip"
        if not _own_file(client, name):
            client.upload_blob(
                name, sample_bundle(bundle), overwrite=True, metadata=SAMPLE, content_settings=ZIP
            )
            names.append(name)
    return names


def read_bundle_file(spec: str) -> tuple[str, bytes]:
    """`BUNDLE_ID=PATH` checked: a bundle of the catalog, a regular zip file of at most
    MAX_FILE_BYTES. ValueError says what is wrong."""
    bundle_id, equals, path_text = spec.partition("=")
    if not equals or not bundle_id or not path_text:
        raise ValueError(f"{spec!r} is not BUNDLE_ID=PATH")
    if bundle_id not in BUNDLES:
        raise ValueError(
            f"{bundle_id!r} is not a bundle of the catalog ({', '.join(BUNDLES)}); "
            "add it to BUNDLES in shared/purchase/catalog.py first"
        )
    path = Path(path_text).expanduser()
    if not path.exists():
        raise ValueError(f"{path_text}: no such file")
    if not path.is_file():
        raise ValueError(f"{path_text}: not a regular file")
    too_big = f"{path_text}: larger than {MAX_FILE_BYTES // 2**20} MiB, which every download holds in memory"
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(too_big)
    with path.open("rb") as file:
        body = file.read(MAX_FILE_BYTES + 1)  # what the file holds now, not what stat said
    if len(body) > MAX_FILE_BYTES:
        raise ValueError(too_big)
    if not body:
        raise ValueError(f"{path_text}: the file is empty")
    if not zipfile.is_zipfile(io.BytesIO(body)):
        raise ValueError(f"{path_text}: not a zip archive; every bundle is served as {bundle_id}.zip")
    return bundle_id, body


def upload(connection_string: str, files: dict[str, bytes], container: str = "bundles") -> list[str]:
    """Each bundle's own file (checked by read_bundle_file) in place of its sample; the blob names."""
    client = _container(connection_string, container)
    for bundle_id, body in files.items():
        client.upload_blob(f"{bundle_id}.zip", body, overwrite=True, content_settings=ZIP)
    return [f"{bundle_id}.zip" for bundle_id in files]


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    settings = {**read_settings(ROOT), **os.environ}
    parser = argparse.ArgumentParser(
        prog="python -m devstack.seed_bundles", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--connection-string", default=settings.get("AzureWebJobsStorage", ""))
    parser.add_argument("--container", default=settings.get("STOREFRONT_BUNDLES_CONTAINER", "bundles"))
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="BUNDLE_ID=PATH",
        help="upload your own zip as this bundle's file (repeatable); nothing else is written",
    )
    args = parser.parse_args(argv)
    if not args.connection_string:
        parser.error("no storage connection string: set AzureWebJobsStorage or pass --connection-string")
    files: dict[str, bytes] = {}
    for spec in args.file:
        try:
            bundle_id, body = read_bundle_file(spec)
        except (ValueError, OSError) as exc:
            parser.error(f"--file {exc}")
        if bundle_id in files:
            parser.error(f"--file {bundle_id!r} is given twice")
        files[bundle_id] = body
    try:
        if files:
            for name in upload(args.connection_string, files, args.container):
                print(f"uploaded {args.container}/{name}: your file, served by its download link")
            return 0
        written = seed(args.connection_string, args.container)
    except ValueError as exc:  # the SDK's word for a connection string it cannot read
        parser.exit(1, f"{parser.prog}: error: the storage connection string: {exc}\n")
    except HttpResponseError as exc:
        parser.exit(1, f"{parser.prog}: error: Blob storage refused: {_first_line(exc)}\n")
    except AzureError as exc:
        parser.exit(
            1, f"{parser.prog}: error: Blob storage did not answer (is `make run` up?): {_first_line(exc)}\n"
        )
    for bundle in BUNDLES.values():
        name = f"{bundle.id}.zip"
        print(
            f"seeded {args.container}/{name}"
            if name in written
            else f"kept {args.container}/{name}: your own file"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

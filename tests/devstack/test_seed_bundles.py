"""devstack/seed_bundles.py: the sample zips `make run` seeds, your own file for a bundle
(`--file BUNDLE_ID=PATH`) and what it refuses, against a real Azurite; and the recipe in
docs/development.md (your own bundle, locally) run as written on a `make run` stack."""

from __future__ import annotations

import base64
import io
import os
import shutil
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from azure.storage.blob import ContainerClient

from devstack import seed_bundles
from devstack.ports import free_port
from devstack.run import DEV_ACCOUNT_KEY, storage_connection
from devstack.seed_bundles import MAX_FILE_BYTES, sample_bundle
from shared.purchase.catalog import BUNDLES
from tests.snippets import MakeRun, snippet
from tests.support import ROOT, UNKNOWN_BUNDLE_ID

pytestmark = pytest.mark.services  # starts processes or servers of its own

RECIPE = "docs/development.md"
END_OF_BUNDLES = "    )\n}\nDEFAULT_BUNDLE_ID"  # where shared/purchase/catalog.py's tuple of bundles closes


def own_zip(tag: str = "mine") -> bytes:
    """A zip no sample equals: random content under a name of its own."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{tag}/notes.txt", os.urandom(64).hex())
    return buffer.getvalue()


@pytest.fixture
def container(azurite) -> Iterator[ContainerClient]:
    """A container of this test's own, deleted after it."""
    client = ContainerClient.from_connection_string(azurite, f"bundles-{uuid.uuid4().hex[:12]}")
    yield client
    if client.exists():
        client.delete_container()


def seed_main(azurite: str, container: ContainerClient, *argv: str) -> int:
    return seed_bundles.main(["--connection-string", azurite, "--container", container.container_name, *argv])


def blob(container: ContainerClient, bundle_id: str) -> bytes:
    return container.download_blob(f"{bundle_id}.zip").readall()


def test_your_file_replaces_the_sample_and_survives_the_seeding_make_run_does_at_start(
    azurite, container, tmp_path, capsys
):
    seed_main(azurite, container)
    yours = tmp_path / "guide.zip"
    yours.write_bytes(own_zip())
    capsys.readouterr()

    uploaded = seed_main(azurite, container, "--file", f"mcp-field-guide={yours}")
    after_upload = capsys.readouterr().out
    seed_main(azurite, container)  # what the next `make run` does
    after_restart = capsys.readouterr().out

    assert uploaded == 0
    name = f"{container.container_name}/mcp-field-guide.zip"
    assert after_upload == f"uploaded {name}: your file, served by its download link\n"
    assert f"kept {name}: your own file\n" in after_restart
    assert blob(container, "mcp-field-guide") == yours.read_bytes()
    assert blob(container, "agent-starter-kit") == sample_bundle(BUNDLES["agent-starter-kit"])
    assert container.get_blob_client("mcp-field-guide.zip").get_blob_properties().content_settings[
        "content_type"
    ] == ("application/zip")


def test_a_sample_is_written_again_when_its_bundle_changes(azurite, container):
    seed_bundles.seed(azurite, container.container_name)
    stale = container.get_blob_client("agent-starter-kit.zip")
    stale.upload_blob(b"an older sample", overwrite=True, metadata=seed_bundles.SAMPLE)

    written = seed_bundles.seed(azurite, container.container_name)

    assert written == [f"{bundle_id}.zip" for bundle_id in BUNDLES]
    assert blob(container, "agent-starter-kit") == sample_bundle(BUNDLES["agent-starter-kit"])


def test_file_only_uploads_the_files_it_names(azurite, container, tmp_path):
    yours = tmp_path / "kit.zip"
    yours.write_bytes(own_zip())

    seed_main(azurite, container, "--file", f"agent-starter-kit={yours}")

    assert [b.name for b in container.list_blobs()] == ["agent-starter-kit.zip"]


REFUSED = (
    *("no equals sign", "no id", "no path", "an id climbing out", "an id as a path", "an unknown id"),
    *("a missing file", "a folder", "a pipe, never read", "a device", "an empty file", "not a zip"),
    *("over 100 MiB", "a bundle twice"),
)


def _refusals(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each case: the --file value, and what the error must say."""
    text, empty, folder, fifo, huge = (
        tmp_path / n for n in ("notes.txt", "empty.zip", "dir", "fifo", "huge")
    )
    text.write_text("not a zip")
    empty.touch()
    folder.mkdir()
    os.mkfifo(fifo)
    with huge.open("wb") as sparse:
        sparse.truncate(MAX_FILE_BYTES + 1)
    zipped = tmp_path / "ok.zip"
    zipped.write_bytes(own_zip())
    return {
        "no equals sign": (str(zipped), "is not BUNDLE_ID=PATH"),
        "no id": (f"={zipped}", "is not BUNDLE_ID=PATH"),
        "no path": ("mcp-field-guide=", "is not BUNDLE_ID=PATH"),
        "an id climbing out": (
            f"../mcp-field-guide={zipped}",
            "'../mcp-field-guide' is not a bundle of the catalog",
        ),
        "an id as a path": (f"/etc/passwd={zipped}", "'/etc/passwd' is not a bundle of the catalog"),
        "an unknown id": (
            f"{UNKNOWN_BUNDLE_ID}={zipped}",
            "add it to BUNDLES in shared/purchase/catalog.py first",
        ),
        "a missing file": (f"mcp-field-guide={tmp_path / 'gone.zip'}", "gone.zip: no such file"),
        "a folder": (f"mcp-field-guide={folder}", "dir: not a regular file"),
        "a pipe, never read": (f"mcp-field-guide={fifo}", "fifo: not a regular file"),
        "a device": ("mcp-field-guide=/dev/zero", "/dev/zero: not a regular file"),
        "an empty file": (f"mcp-field-guide={empty}", "empty.zip: the file is empty"),
        "not a zip": (f"mcp-field-guide={text}", "notes.txt: not a zip archive"),
        "over 100 MiB": (f"mcp-field-guide={huge}", "huge: larger than 100 MiB"),
        "a bundle twice": (f"mcp-field-guide={zipped}", "'mcp-field-guide' is given twice"),
    }


@pytest.mark.parametrize("case", REFUSED)
def test_a_bad_file_is_refused_with_a_clear_error_and_nothing_written(
    azurite, container, tmp_path, capsys, case
):
    value, says = _refusals(tmp_path)[case]
    argv = ["--file", value] * (2 if case == "a bundle twice" else 1)

    with pytest.raises(SystemExit) as exit_:
        seed_main(azurite, container, *argv)

    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("python -m devstack.seed_bundles: error: --file ") and says in error, error
    assert not container.exists()


def test_storage_that_is_not_there_is_named_within_seconds(tmp_path, capsys):
    yours = tmp_path / "kit.zip"
    yours.write_bytes(own_zip())
    nothing_listens = storage_connection(free_port(), free_port(), free_port())
    started = time.monotonic()

    with pytest.raises(SystemExit) as exit_:
        seed_bundles.main(["--connection-string", nothing_listens, "--file", f"agent-starter-kit={yours}"])

    assert exit_.value.code == 1
    assert time.monotonic() - started < 10
    error = capsys.readouterr().err
    assert error.startswith(
        "python -m devstack.seed_bundles: error: Blob storage did not answer (is `make run` up?)"
    )
    assert "Traceback" not in error


def test_storage_that_refuses_the_key_is_named(azurite, capsys):
    wrong_key = azurite.replace(DEV_ACCOUNT_KEY, base64.b64encode(b"not the account key").decode())

    with pytest.raises(SystemExit) as exit_:
        seed_bundles.main(["--connection-string", wrong_key, "--container", f"b-{uuid.uuid4().hex[:12]}"])

    assert exit_.value.code == 1
    error = capsys.readouterr().err
    assert error.startswith("python -m devstack.seed_bundles: error: Blob storage refused: ")
    assert "Traceback" not in error


def test_a_malformed_connection_string_is_named(capsys):
    with pytest.raises(SystemExit) as exit_:
        seed_bundles.main(["--connection-string", "not one"])

    assert exit_.value.code == 1
    assert capsys.readouterr().err.startswith(
        "python -m devstack.seed_bundles: error: the storage connection string"
    )


# --- the recipe in docs/development.md ------------------------------------------------------------


def checkout_copy(tmp_path: Path) -> Path:
    """The app and devstack/ copied, to add a bundle to without touching the checkout; it shares
    the checkout's .venv and node_modules, as a second clone would have its own."""
    copy = tmp_path / "checkout"
    for name in ("shared", "devstack"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("function_app.py", "host.json", "local.settings.json.example"):
        shutil.copy2(ROOT / name, copy / name)
    for name in (".venv", "node_modules"):
        (copy / name).symlink_to(ROOT / name)
    return copy


def test_the_own_bundle_recipe_downloads_your_file_as_written(tmp_path):
    add, upload, buy = (snippet(RECIPE, m) for m in ('id="field-notes"', "seed_bundles --file", "/_sandbox"))
    copy = checkout_copy(tmp_path)
    catalog = copy / "shared" / "purchase" / "catalog.py"
    assert catalog.read_text().count(END_OF_BUNDLES) == 1
    catalog.write_text(catalog.read_text().replace(END_OF_BUNDLES, add + END_OF_BUNDLES))  # step 1
    yours = copy / "path" / "to" / "field-notes.zip"
    yours.parent.mkdir(parents=True)
    yours.write_bytes(own_zip("field-notes"))

    with MakeRun(copy, tmp_path / "azurite") as stack:  # step 1's restart
        listed = requests.get(f"{stack.url}/api/bundles", timeout=10).json()["bundles"]
        uploaded = stack.run(upload)  # step 2
        bought = stack.run(buy)  # step 3

    assert {"id": "field-notes", "title": "Field Notes"}.items() <= listed[-1].items()
    assert uploaded.returncode == 0, uploaded.stderr
    assert uploaded.stdout == "uploaded bundles/field-notes.zip: your file, served by its download link\n"
    assert bought.returncode == 0, bought.stderr
    assert bought.stdout == "200\nthe download is your file\n"
    assert (copy / "field-notes.zip").read_bytes() == yours.read_bytes()

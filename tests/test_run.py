"""`make run` (devstack/run.py) as a newcomer uses it: everything starts, the MCP Python SDK buys twice
with one key, one email arrives with a working download link, and Ctrl-C stops it all."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from mcp import Client

from devstack.run import host_name, settings_file, settings_for_func
from tests.support import ROOT, free_port, free_ports, unique_email, unique_key


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _read_until(proc: subprocess.Popen, marker: str, errors: Path, timeout: float = 90) -> str:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(
        f"{marker!r} never printed (exit status {proc.poll()}):\n{''.join(seen)[-3000:]}\n"
        f"stderr:\n{errors.read_text()[-3000:]}"
    )


def test_make_run_starts_everything_serves_an_idempotent_purchase_and_stops_on_ctrl_c(tmp_path):
    host_port, sandbox_port, storage = free_port(), free_port(), free_ports(3)
    command = [
        sys.executable,
        "-m",
        "devstack.run",
        "--port",
        str(host_port),
        "--sandbox-port",
        str(sandbox_port),
        "--storage-port",
        str(storage),
        "--data-dir",
        str(tmp_path / "azurite"),
    ]
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        banner = _read_until(proc, "Press Ctrl-C to stop everything.", errors)
        mcp_url = f"http://localhost:{host_port}/api/a2a/mcp"
        email, key = unique_email("make-run"), unique_key()

        async def twice():
            async with Client(mcp_url) as client:
                args = {"email": email, "idempotency_key": key}
                return [await client.call_tool("purchase_free_bundle", args) for _ in range(2)]

        first, second = asyncio.run(twice())
        emails = requests.get(
            f"http://127.0.0.1:{sandbox_port}/_sandbox/emails", params={"to": email}, timeout=10
        )
        link = next(link for link in emails.json()[0]["links"] if "/api/download/" in link)
        download = requests.get(link, timeout=10)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)

    assert mcp_url in banner and '"mcp-remote"' in banner
    if shutil.which("func"):
        assert "  Functions host:  func start (Azure Functions Core Tools)\n" in banner
    else:
        assert "  Functions host:  the repo's dev host (python -m devstack.devhost)" in banner
    assert f"  Settings:        {settings_file(ROOT, shutil.which('func') is not None)}\n" in banner
    assert f"http://localhost:{sandbox_port}/" in banner
    assert first.is_error is False
    assert second.structured_content == first.structured_content
    assert len(emails.json()) == 1
    assert download.status_code == 200 and download.content.startswith(b"PK")
    assert code == 0
    assert not any(_listening(port) for port in (host_port, sandbox_port, storage, storage + 2))


def test_func_start_gets_local_settings_from_the_example_once_and_never_overwritten(tmp_path):
    example = tmp_path / "local.settings.json.example"
    example.write_text('{"Values": {"STOREFRONT_SENDER_NAME": "dev"}}')

    first = settings_for_func(tmp_path)
    (tmp_path / "local.settings.json").write_text('{"Values": {"STOREFRONT_SENDER_NAME": "mine"}}')
    second = settings_for_func(tmp_path)

    assert first == "created local.settings.json from local.settings.json.example (development values only)"
    assert second is None
    assert "mine" in (tmp_path / "local.settings.json").read_text()


def test_without_an_example_nothing_is_created(tmp_path):
    assert settings_for_func(tmp_path) is None
    assert not (tmp_path / "local.settings.json").exists()


def test_the_banner_names_the_settings_file_each_host_reads(tmp_path):
    (tmp_path / "local.settings.json.example").write_text("{}")

    dev_host_example = settings_file(tmp_path, core_tools=False)
    func_missing = settings_file(tmp_path, core_tools=True)
    (tmp_path / "local.settings.json").write_text("{}")
    dev_host_own, func_own = (
        settings_file(tmp_path, core_tools=False),
        settings_file(tmp_path, core_tools=True),
    )

    assert dev_host_example == "local.settings.json.example (no local.settings.json)"
    assert func_missing == "none (local.settings.json not found)"
    assert dev_host_own == func_own == "local.settings.json"


def test_the_banner_names_the_host_that_was_started():
    assert host_name(core_tools=True) == "func start (Azure Functions Core Tools)"
    assert host_name(core_tools=False) == (
        "the repo's dev host (python -m devstack.devhost), as Azure Functions Core Tools is not installed"
    )

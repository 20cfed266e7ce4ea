"""`make run` (devstack/run.py) as a newcomer uses it: everything starts, the MCP Python SDK buys twice
with one key, one email arrives with a working download link, and Ctrl-C stops it all. Started as
a background job starts it (SIGINT ignored), it still stops on SIGINT, on `make stop` (SIGTERM),
and killed outright it leaves no service behind. `make reset` clears the stores once it is down."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from mcp import Client

from devstack import processes
from devstack.node import NODE22
from devstack.ports import free_port, free_ports
from devstack.run import PID_FILE, host_name, settings_file, settings_for_func
from tests.support import (
    HANG_SECONDS,
    INSTALLED,
    ROOT,
    as_a_background_job,
    shell_env,
    unique_email,
    unique_key,
)

pytestmark = pytest.mark.services  # starts processes or servers of its own

BANNER_END = "Press Ctrl-C to stop everything"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _program(pid: int) -> tuple[Path, bytes]:
    """The executable a process runs and its command line."""
    return Path(f"/proc/{pid}/exe").resolve(), Path(f"/proc/{pid}/cmdline").read_bytes()


def _read_until(proc: subprocess.Popen, marker: str, errors: Path, timeout: float = HANG_SECONDS) -> str:
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


def make(target: str, data_dir: Path) -> subprocess.CompletedProcess:
    """`make stop` or `make reset`, on `data_dir`."""
    command = ["make", "--no-print-directory", "-s", target, f"DATA_DIR={data_dir}"]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)


class Stack:
    """`python -m devstack.run` on free ports and its own data folder, started in the background."""

    def __init__(self, data_dir: Path, logs: Path, env: dict[str, str] | None = None):
        self.host_port, self.sandbox_port, self.storage = free_port(), free_port(), free_ports(3)
        self.data_dir, self.errors = data_dir, logs / f"stderr-{self.host_port}.txt"
        command = as_a_background_job([sys.executable, "-m", "devstack.run", *self.options()])
        with self.errors.open("w") as stderr:
            self.proc = processes.start(
                command, cwd=ROOT, env=shell_env(env), stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        try:
            self.banner = _read_until(self.proc, BANNER_END, self.errors)
        except AssertionError:
            processes.stop(self.proc)
            raise
        self.services = processes.descendants(self.proc.pid)
        self.programs = {pid: _program(pid) for pid in self.services}

    def options(self) -> list[str]:
        return [
            *("--port", str(self.host_port), "--sandbox-port", str(self.sandbox_port)),
            *("--storage-port", str(self.storage), "--data-dir", str(self.data_dir)),
        ]

    def make(self, target: str) -> subprocess.CompletedProcess:
        """`make stop` or `make reset`, on this stack's data folder."""
        return make(target, self.data_dir)

    def ports(self) -> tuple[int, ...]:
        return (self.host_port, self.sandbox_port, self.storage, self.storage + 2)

    def gone(self, timeout: float = HANG_SECONDS) -> bool:
        """Whether every service it started has ended and no port of it listens, within `timeout`."""
        deadline = time.monotonic() + timeout
        while any(processes.alive(pid) for pid in self.services) or any(map(_listening, self.ports())):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


def test_make_run_starts_everything_serves_an_idempotent_purchase_and_stops_on_ctrl_c(tmp_path):
    stack = Stack(tmp_path / "azurite", tmp_path)
    try:
        mcp_url = f"http://localhost:{stack.host_port}/api/a2a/mcp"
        email, key = unique_email("make-run"), unique_key()

        async def twice():
            async with Client(mcp_url) as client:
                args = {"email": email, "idempotency_key": key}
                return [await client.call_tool("purchase_free_bundle", args) for _ in range(2)]

        first, second = asyncio.run(twice())
        emails = requests.get(
            f"http://127.0.0.1:{stack.sandbox_port}/_sandbox/emails", params={"to": email}, timeout=10
        )
        link = next(link for link in emails.json()[0]["links"] if "/api/download/" in link)
        download = requests.get(link, timeout=10)
    finally:
        stack.proc.send_signal(signal.SIGINT)
        code = stack.proc.wait(timeout=HANG_SECONDS)

    banner, sandbox_port = stack.banner, stack.sandbox_port
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
    assert len(stack.services) >= 3 and stack.gone()
    assert not (stack.data_dir / PID_FILE).exists()
    azurite = [exe for exe, command in stack.programs.values() if b"node_modules/.bin/azurite" in command]
    assert azurite == [NODE22.resolve()]


def test_make_stop_ends_a_background_make_run_and_make_reset_then_clears_its_counters(tmp_path):
    limited = {**os.environ, "STOREFRONT_RATE_LIMIT_PER_HOUR": "1"}
    stack = Stack(tmp_path / "azurite", tmp_path, limited)
    purchase = f"http://127.0.0.1:{stack.host_port}/api/a2a/purchase"
    try:
        bought = requests.post(purchase, json={"email": unique_email("reset")}, timeout=30)
        limited_429 = requests.post(purchase, json={"email": unique_email("reset")}, timeout=30)
        second = subprocess.run(  # on the same ports: were it not refused, it would find them busy
            [sys.executable, "-m", "devstack.run", *stack.options()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        )
        refused_while_up = stack.make("reset")
        stopped = stack.make("stop")
        code = stack.proc.wait(timeout=HANG_SECONDS)
    finally:
        processes.stop(stack.proc)
    gone = stack.gone()
    stored = sorted(path.name for path in stack.data_dir.iterdir())
    reset = stack.make("reset")
    left = sorted(path.name for path in stack.data_dir.iterdir())
    again = Stack(tmp_path / "azurite", tmp_path, limited)
    try:
        base = f"http://127.0.0.1:{again.host_port}"
        after = requests.post(f"{base}/api/a2a/purchase", json={"email": unique_email("reset")}, timeout=30)
        old_receipt = requests.get(f"{base}/api/receipts/{bought.json()['receipt_id']}", timeout=10)
    finally:
        processes.stop(again.proc)

    assert bought.status_code == 200 and limited_429.status_code == 429
    assert limited_429.json()["error"]["message"].endswith("; locally, `make reset` clears the counters")
    assert second.returncode == 1
    assert second.stderr == f"make run is already running (pid {stack.proc.pid}) on {stack.data_dir}\n"
    assert refused_while_up.returncode == 2  # make says the recipe failed
    assert f"make run is up (pid {stack.proc.pid})" in refused_while_up.stderr
    assert "stop it first" in refused_while_up.stderr
    assert (stopped.returncode, code, gone) == (0, 0, True)
    assert stopped.stdout == f"stopped make run (pid {stack.proc.pid})\n"
    assert "__azurite_db_table__.json" in stored and "__blobstorage__" in stored
    assert reset.returncode == 0 and "cleared the local stores" in reset.stdout
    assert left == []
    assert after.status_code == 200, after.text
    assert old_receipt.status_code == 404


def test_a_killed_make_run_leaves_no_service_behind(tmp_path):
    stack = Stack(tmp_path / "azurite", tmp_path)
    stack.proc.kill()
    stack.proc.wait(timeout=HANG_SECONDS)

    assert len(stack.services) >= 3 and stack.gone()
    assert (stack.data_dir / PID_FILE).exists()
    assert stack.make("stop").stdout.startswith("make run is not running")
    assert stack.make("reset").returncode == 0


def test_a_stale_pid_file_names_no_stack_though_its_pid_now_runs_another_make_run(tmp_path):
    # A stack killed outright leaves its pid file behind, and the pid may since name any process,
    # another checkout's `python -m devstack.run` too: make stop must not end it.
    data_dir = tmp_path / "azurite"
    (data_dir / "__blobstorage__").mkdir(parents=True)
    other = processes.start([sys.executable, "-c", "import time; time.sleep(60)", "devstack.run"])
    try:
        (data_dir / PID_FILE).write_text(f"{other.pid}\n")
        stopped, reset = make("stop", data_dir), make("reset", data_dir)
        still_running = other.poll() is None
    finally:
        processes.stop(other)

    assert stopped.stdout.startswith("make run is not running"), stopped.stdout + stopped.stderr
    assert still_running
    assert reset.returncode == 0, reset.stderr
    assert not (data_dir / "__blobstorage__").exists()


def test_make_reset_removes_a_link_in_the_data_folder_never_what_it_points_to(tmp_path):
    data_dir, elsewhere = tmp_path / "azurite", tmp_path / "elsewhere"
    data_dir.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not Azurite's")
    (data_dir / "__blobstorage__").symlink_to(elsewhere, target_is_directory=True)

    reset = make("reset", data_dir)

    assert reset.returncode == 0, reset.stderr
    assert list(data_dir.iterdir()) == []
    assert (elsewhere / "keep.txt").read_text() == "not Azurite's"


def test_the_data_folder_and_ports_come_from_makes_command_line_never_from_the_environment(tmp_path):
    # DATA_DIR and PORT are common variable names: one set for another tool must not point make
    # run at its folder or port, nor make reset at the Azurite files in it.
    elsewhere = {"DATA_DIR": str(tmp_path), "PORT": "3000", "SANDBOX_PORT": "3001", "STORAGE_PORT": "3002"}
    shown = {
        target: subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-n",
                *INSTALLED,
                target,
            ],
            cwd=ROOT,
            env={**os.environ, **elsewhere},
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        ).stdout
        for target in ("run", "stop", "reset")
    }

    assert shown["run"].splitlines()[-1].endswith(" -m devstack.run --data-dir .azurite")
    for target in ("stop", "reset"):
        assert f"devstack.run {target} --data-dir .azurite;" in shown[target]
    for plan in shown.values():
        assert str(tmp_path) not in plan and "-port" not in plan


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

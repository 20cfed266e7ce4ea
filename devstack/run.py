"""`make run`: start Azurite, the Brevo sandbox and the Functions host, print where they are and a
client configuration to paste, and stop everything on Ctrl-C or SIGTERM (`make stop`).

The host is `func start` where Azure Functions Core Tools is installed, otherwise the repo's dev
host; the banner says which, and which settings file it reads. Azurite keeps its data in
`.azurite/` so receipts survive a restart; `make reset` clears it while the stack is down. The
stack's pid is in `.azurite/make-run.pid`, locked while it runs, for `make stop` and `make reset`.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from devstack import processes, seed_bundles, taken_ports
from devstack.devhost.settings import SETTINGS_FILES
from devstack.node import with_node22

ROOT = Path(__file__).resolve().parent.parent
AZURITE = ROOT / "node_modules" / ".bin" / "azurite"
PID_FILE = "make-run.pid"
# What Azurite keeps in its --location: the databases and the blob and queue extents.
AZURITE_FILES = ("__azurite_db_*.json", "__blobstorage__", "__queuestorage__", "__tablestorage__")
# Azurite's well-known development account (public, documented by Microsoft; not a secret).
DEV_ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def wait_for(port: int, proc: subprocess.Popen, name: str, timeout: float = 300) -> None:
    """Until the service listens: a bound on a hang, generous for a loaded machine and a first
    `func start`, which fetches its extension bundle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with status {proc.returncode} before it was ready")
        if taken_ports.listening(port):
            return
        time.sleep(0.2)
    raise SystemExit(f"{name} was not listening on port {port} after {timeout:.0f}s")


def storage_connection(blob_port: int, table_port: int, queue_port: int) -> str:
    """A connection string for a local Azurite on these ports (the tests and the bench use it too)."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_ACCOUNT_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{blob_port}/devstoreaccount1;"
        f"QueueEndpoint=http://127.0.0.1:{queue_port}/devstoreaccount1;"
        f"TableEndpoint=http://127.0.0.1:{table_port}/devstoreaccount1;"
    )


def child_env(host_port: int, storage_port: int, sandbox_port: int) -> dict[str, str]:
    """Settings for the host when the ports differ from the ones local settings name, and Node 22
    first on PATH for Azurite."""
    env = with_node22(os.environ)
    if host_port != taken_ports.DEFAULT_HOST_PORT:
        env["STOREFRONT_PUBLIC_BASE_URL"] = f"http://localhost:{host_port}"
    if storage_port != taken_ports.DEFAULT_STORAGE_PORT:
        env["AzureWebJobsStorage"] = storage_connection(storage_port, storage_port + 2, storage_port + 1)
    if sandbox_port != taken_ports.DEFAULT_SANDBOX_PORT:
        env["BREVO_BASE_URL"] = f"http://127.0.0.1:{sandbox_port}/v3"
    return env


def settings_for_func(root: Path) -> str | None:
    """`func start` reads only local.settings.json; on a fresh clone, start it from the example
    (development values) and say so. The dev host falls back to the example by itself."""
    target, example = root / "local.settings.json", root / "local.settings.json.example"
    if target.exists() or not example.exists():
        return None
    shutil.copyfile(example, target)
    return f"created {target.name} from {example.name} (development values only)"


def settings_file(root: Path, core_tools: bool) -> str:
    """The settings file the host reads: `func start` only local.settings.json, the dev host that
    file or else the example."""
    names = SETTINGS_FILES[:1] if core_tools else SETTINGS_FILES
    found = next((name for name in names if (root / name).is_file()), None)
    if found is None:
        return f"none ({' or '.join(names)} not found)"
    return found if found == SETTINGS_FILES[0] else f"{found} (no {SETTINGS_FILES[0]})"


def host_name(core_tools: bool) -> str:
    if core_tools:
        return "func start (Azure Functions Core Tools)"
    return "the repo's dev host (python -m devstack.devhost), as Azure Functions Core Tools is not installed"


def commands(
    host_port: int, sandbox_port: int, storage_port: int, data_dir: Path, core_tools: bool
) -> list[tuple[str, list[str], int]]:
    data_dir.mkdir(parents=True, exist_ok=True)
    azurite = [
        str(AZURITE),
        *("--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"),
        *("--location", str(data_dir)),
        *("--blobHost", "127.0.0.1", "--blobPort", str(storage_port)),
        *("--queueHost", "127.0.0.1", "--queuePort", str(storage_port + 1)),
        *("--tableHost", "127.0.0.1", "--tablePort", str(storage_port + 2)),
    ]
    sandbox = [sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(sandbox_port)]
    if core_tools:
        host = ["func", "start", "--port", str(host_port)]
    else:
        host = [sys.executable, "-m", "devstack.devhost", "--port", str(host_port)]
    return [
        ("Azurite", azurite, storage_port + 2),
        ("Brevo sandbox", sandbox, sandbox_port),
        ("host", host, host_port),
    ]


def banner(host_port: int, sandbox_port: int, host: str, settings: str) -> str:
    mcp_url = f"http://localhost:{host_port}/api/a2a/mcp"
    claude = {"mcpServers": {"storefront": {"command": "npx", "args": ["-y", "mcp-remote", mcp_url]}}}
    return "\n".join(
        [
            "",
            "Storefront is running.",
            f"  Functions host:  {host}",
            f"  Settings:        {settings}",
            f"  MCP endpoint:    {mcp_url}",
            f"  HTTP purchase:   http://localhost:{host_port}/api/a2a/purchase",
            f"  Brevo sandbox:   http://localhost:{sandbox_port}/  (captured emails and download links)",
            "",
            "Claude Desktop (claude_desktop_config.json), through mcp-remote:",
            json.dumps(claude, indent=2),
            "",
            "Press Ctrl-C to stop everything (or `make stop` from another terminal).",
        ]
    )


def _locked(file: IO[str]) -> bool:
    """Take the pid file's lock, which the kernel drops when its holder ends however it ends;
    False while another process holds it."""
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def running_stack(data_dir: Path) -> int | None:
    """The pid of the `make run` whose stores are in `data_dir`, while it runs: it holds the pid
    file's lock, so the file of a stack killed outright, whose pid may since name any process
    (another checkout's `make run` too), names none."""
    try:
        with (data_dir / PID_FILE).open() as file:
            if _locked(file):
                return None
            pid = int(file.read().strip())
    except (OSError, ValueError):
        return None
    if not processes.alive(pid):
        return None
    try:  # the pid file of a stack killed outright may name a process that came later
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        shown = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=10
        )
        return pid if "devstack.run" in shown.stdout else None
    return pid if b"devstack.run" in command else None


def stop(data_dir: Path, timeout: float = 30) -> int:
    """`make stop`: SIGTERM to the running stack, as Ctrl-C in its terminal would stop it."""
    pid = running_stack(data_dir)
    if pid is None:
        print(f"make run is not running (no live stack in {data_dir / PID_FILE})")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while processes.alive(pid):
        if time.monotonic() > deadline:
            print(f"make run (pid {pid}) is still stopping after {timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(f"stopped make run (pid {pid})")
    return 0


def reset(data_dir: Path) -> int:
    """`make reset`: delete what Azurite stored in `data_dir`, only while no stack uses it."""
    pid = running_stack(data_dir)
    if pid is not None:
        print(
            f"make run is up (pid {pid}) and holds the stores in {data_dir}; stop it first "
            "(Ctrl-C in its terminal, or `make stop`), then run `make reset` again",
            file=sys.stderr,
        )
        return 1
    for pattern in AZURITE_FILES:
        for path in data_dir.glob(pattern):
            if path.is_dir() and not path.is_symlink():  # a link goes, never what it points to
                shutil.rmtree(path)
            else:
                path.unlink()
    print(
        f"cleared the local stores in {data_dir}: the rate-limit, recipient and cost counters, "
        "idempotency keys, receipts and the ledger. The next `make run` seeds the bundles again; "
        "the Brevo sandbox keeps its emails in memory only, so they went when make run stopped."
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "action",
        nargs="?",
        choices=("start", "stop", "reset"),
        default="start",
        help="start the stack (the default), stop a running one, or clear its stores (when stopped)",
    )
    parser.add_argument("--port", type=int, default=taken_ports.DEFAULT_HOST_PORT, help="Functions host port")
    parser.add_argument(
        "--sandbox-port", type=int, default=taken_ports.DEFAULT_SANDBOX_PORT, help="Brevo sandbox port"
    )
    parser.add_argument(
        "--storage-port",
        type=int,
        default=taken_ports.DEFAULT_STORAGE_PORT,
        help="Azurite blob port (queue +1, table +2)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=taken_ports.DEFAULT_DATA_DIR, help="Azurite's data folder"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.action == "stop":
        return stop(args.data_dir)
    if args.action == "reset":
        return reset(args.data_dir)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    if not AZURITE.exists():
        raise SystemExit("Azurite is not installed; run `make run` (it runs `npm install` first)")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    pid_file = args.data_dir / PID_FILE
    holder = pid_file.open("a+")  # locked until this process ends: make stop and make reset ask it
    if not _locked(holder):
        holder.close()
        already = running_stack(args.data_dir)
        raise SystemExit(f"make run is already running (pid {already}) on {args.data_dir}")
    busy = taken_ports.taken(args.port, args.sandbox_port, args.storage_port)
    if busy:
        holder.close()
        raise SystemExit(
            taken_ports.advice(busy, args.port, args.sandbox_port, args.storage_port, args.data_dir)
        )
    holder.truncate(0)
    holder.write(f"{os.getpid()}\n")
    holder.flush()

    processes.interrupt_on_signals()
    started: list[subprocess.Popen] = []
    try:
        env = child_env(args.port, args.storage_port, args.sandbox_port)
        core_tools = shutil.which("func") is not None
        services = commands(args.port, args.sandbox_port, args.storage_port, args.data_dir, core_tools)
        if core_tools:
            note = settings_for_func(ROOT)
            if note:
                print(note, flush=True)
        for name, cmd, port in services:
            proc = processes.start(cmd, cwd=ROOT, env=env)
            started.append(proc)
            wait_for(port, proc, name)
            if name == "Azurite":
                seed = (
                    []
                    if args.storage_port == taken_ports.DEFAULT_STORAGE_PORT
                    else ["--connection-string", env["AzureWebJobsStorage"]]
                )
                seed_bundles.main(seed)
        host, settings = host_name(core_tools), settings_file(ROOT, core_tools)
        print(banner(args.port, args.sandbox_port, host, settings), flush=True)
        while all(p.poll() is None for p in started):
            time.sleep(0.5)
        print("a service stopped; shutting down the rest", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C does not cut the cleanup short
            signal.signal(signum, signal.SIG_IGN)
        processes.stop(*reversed(started))
        pid_file.unlink(missing_ok=True)
        holder.close()


if __name__ == "__main__":
    sys.exit(main())

"""The local services started as processes on free ports, for the test suite, the bench and the
soak: a process waited for until it listens (`start_process`), a dev host until it serves
(`start_host`), and Azurite with the Brevo sandbox for a bench or soak run (`Stack`). Each is
started by `devstack.processes`, so none outlives its caller."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from devstack import processes
from devstack.ports import free_port
from devstack.run import ROOT, storage_connection

# Bounds on a hang, never on speed: a service that works starts long before them even on a 2-core
# machine under the whole suite's load.
START_SECONDS = 300


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = START_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on port {port} after {timeout}s")


def dev_settings() -> dict[str, str]:
    """The development values from local.settings.json.example, which the tests, the bench and the
    soak run with."""
    values = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]
    return {k: str(v) for k, v in values.items()}


@dataclass
class Service:
    """A started process with its base URL and the file its output goes to."""

    proc: subprocess.Popen
    url: str
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        processes.stop(self.proc)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_process(
    args: list[str], port: int, log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen:
    log = log_path.open("w")
    proc = processes.start(
        args,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, proc)
    except RuntimeError:
        processes.stop(proc, grace=0)
        raise RuntimeError(f"{args[0]} failed to start:\n{log_path.read_text()[-3000:]}") from None
    return proc


# The timers a test's dev host runs on their schedules: the contact drainer, as a deployed store
# does. The others (the reaper, the receipt repair) run when a test asks, so that their work,
# every few minutes, never lands in the middle of a test that watches the stores.
HOST_TIMERS = "drain_contacts"


def start_host(log_dir: Path, env: dict[str, str], timers: str = HOST_TIMERS, port: int = 0) -> Service:
    """A dev host on `port` (0: a free one) with the development settings and `env` over them."""
    port = port or free_port()
    log_path = log_dir / f"devhost-{port}.log"
    full_env = {**dev_settings(), **env}
    proc = start_process(
        [
            *(sys.executable, "-m", "devstack.devhost", "--port", str(port)),
            *("--app-dir", str(ROOT), "--timers", timers),
        ],
        port,
        log_path,
        full_env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            # Serving: health answers, 200 or (a host started unconfigured or with a store down) 503.
            if requests.get(base + "/api/health", timeout=10).status_code in (200, 503):
                return Service(proc, base, log_path, full_env)
        except requests.RequestException:
            pass
        time.sleep(0.1)
    processes.stop(proc, grace=0)
    raise RuntimeError(f"dev host did not become healthy:\n{log_path.read_text()[-3000:]}")


class Stack:
    """Azurite (in memory) and the Brevo sandbox, started for a bench or soak run and stopped at its
    end, with the dev hosts started on them."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.blob, self.table, self.queue = free_port(), free_port(), free_port()
        azurite = [
            str(ROOT / "node_modules" / ".bin" / "azurite"),
            *("--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--inMemoryPersistence"),
            *("--blobHost", "127.0.0.1", "--blobPort", str(self.blob)),
            *("--queueHost", "127.0.0.1", "--queuePort", str(self.queue)),
            *("--tableHost", "127.0.0.1", "--tablePort", str(self.table)),
        ]
        self.procs = [start_process(azurite, self.table, logs / "azurite.log")]
        port = free_port()
        sandbox = [sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(port)]
        self.procs.append(start_process(sandbox, port, logs / "sandbox.log"))
        self.sandbox = f"http://127.0.0.1:{port}"
        self.connection = storage_connection(self.blob, self.table, self.queue)
        self.hosts: list[Service] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **dev_settings(),
            "AzureWebJobsStorage": self.connection,
            "BREVO_BASE_URL": f"{self.sandbox}/v3",
            "STOREFRONT_RATE_LIMIT_PER_HOUR": "1000000",
            "STOREFRONT_DAILY_COST_CEILING_USD": "1000000",
            **extra,
        }

    def brevo_calls(self) -> int:
        stats = requests.get(f"{self.sandbox}/_sandbox/stats", timeout=10).json()
        return sum(stats["requests"].values())

    def start_host(self, **extra: str) -> Service:
        host = start_host(self.logs, self.env(**extra))
        self.hosts.append(host)
        return host

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=60)

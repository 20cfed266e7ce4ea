"""The soak's services: its own Azurite and Brevo sandbox (started as the bench starts them), a
fault proxy in front of each of Azurite's Table and Blob services, and dev hosts whose storage goes
through the proxies. A host can be killed and started again on the same port.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import requests

from bench.__main__ import Stack as Services
from tests.faultproxy import FaultProxy, proxied
from tests.support import ROOT, Service, dev_settings, free_port, start_process


class Host:
    """One dev host process on a port of its own for the whole run."""

    def __init__(self, index: int, env: dict[str, str], logs: Path):
        self.index = index
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.starts = 0
        self.service: Service | None = None
        self._env = env
        self._logs = logs
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.service is not None and self.service.proc.poll() is None

    def start(self) -> None:
        with self._lock:
            self.starts += 1
            log = self._logs / f"host{self.index}-{self.starts}.log"
            args = [
                sys.executable,
                "-m",
                "devstack.devhost",
                "--port",
                str(self.port),
                "--app-dir",
                str(ROOT),
            ]
            proc = start_process(args, self.port, log, self._env)
            self.service = Service(proc, self.url, log)
            _wait_serving(self.service)

    def kill(self) -> None:
        """SIGKILL: no clean-up, no answer to what is in flight."""
        with self._lock:
            if self.alive:
                self.service.proc.kill()
                self.service.proc.wait()

    def stop(self) -> None:
        with self._lock:
            if self.service is not None:
                self.service.stop()


def _wait_serving(host: Service, timeout: float = 30.0) -> None:
    """Until the host serves: health answers 200, or 503 while a store is down (the soak restarts
    hosts in the middle of its faults)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and host.proc.poll() is None:
        try:
            if requests.get(f"{host.url}/api/health", timeout=10).status_code in (200, 503):
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    host.proc.kill()
    raise RuntimeError(f"dev host did not start serving:\n{host.log()[-3000:]}")


class Stack:
    def __init__(self, logs: Path, settings: dict[str, str], hosts: int = 2):
        self.hosts: list[Host] = []
        self._services = Services(logs)
        self.connection = self._services.connection  # straight to Azurite, for the checks
        self.sandbox = self._services.sandbox
        self.table_proxy = FaultProxy(self._services.table)
        self.blob_proxy = FaultProxy(self._services.blob)
        env = {
            **dev_settings(),
            **settings,
            "AzureWebJobsStorage": proxied(self.connection, blob=self.blob_proxy, table=self.table_proxy),
            "BREVO_BASE_URL": f"{self.sandbox}/v3",
        }
        try:
            self.table_proxy.start()
            self.blob_proxy.start()
            for index in range(hosts):
                self.hosts.append(Host(index, env, logs))
                self.hosts[-1].start()
        except BaseException:
            self.stop()
            raise

    def live_url(self) -> str:
        return next(host.url for host in self.hosts if host.alive)

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        self.table_proxy.stop()
        self.blob_proxy.stop()
        self._services.stop()

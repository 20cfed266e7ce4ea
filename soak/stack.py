"""The soak's services: its own Azurite and Brevo sandbox (`devstack.services.Stack`, as the bench
starts them), a fault proxy in front of each of Azurite's Table, Blob and Queue services, and dev
hosts whose storage goes through the proxies. A host can be killed and started again on the same
port.

The hosts run the contact drainer on its schedule (every 10 s), as a deployed store does; the
other timers run when the soak asks (`run_function`), so the receipt repair runs once the faults
have stopped, as the soak's report says.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import requests

from devstack import services as backing
from devstack.faultproxy import FaultProxy, proxied
from devstack.ports import free_port
from devstack.run import ROOT
from devstack.services import Service, dev_settings, start_process

TIMERS = "drain_contacts"  # the timers a host runs on their schedules


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
    def imports(self) -> bool:
        """Whether this host's drainer imports batches into a list (else it creates one by one)."""
        return bool(self._env.get("BREVO_CONTACT_LIST_ID", "").strip())

    @property
    def alive(self) -> bool:
        return self.service is not None and self.service.proc.poll() is None

    def start(self) -> None:
        """Start the host, unless it is running (two restarts may race at the end of the load)."""
        with self._lock:
            if self.alive:
                return
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
                "--timers",
                TIMERS,
            ]
            proc = start_process(args, self.port, log, self._env)
            self.service = Service(proc, self.url, log)
            _wait_serving(self.service)

    def kill(self) -> None:
        """SIGKILL: no clean-up, no answer to what is in flight."""
        with self._lock:
            if self.service is not None and self.alive:
                self.service.proc.kill()
                self.service.proc.wait()

    def stop(self) -> None:
        with self._lock:
            if self.service is not None:
                self.service.stop()

    def run_function(self, name: str, timeout: float = 300.0) -> str:
        """Run a timer function now through the admin API, which answers once the run is over."""
        return run_function(self.url, name, timeout)


def run_function(url: str, name: str, timeout: float = 300.0) -> str:
    """`POST /admin/functions/{name}`: "ran", "absent (404)", or what went wrong."""
    try:
        response = requests.post(f"{url}/admin/functions/{name}", json={"input": ""}, timeout=timeout)
    except requests.RequestException as exc:
        return f"unreachable ({type(exc).__name__})"
    return {202: "ran", 404: "absent (404)"}.get(response.status_code, f"failed ({response.status_code})")


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
    """`settings` for every host, then `per_host[i]` for host i."""

    def __init__(
        self,
        logs: Path,
        settings: dict[str, str],
        hosts: int = 2,
        per_host: Sequence[dict[str, str]] = (),
    ):
        self.hosts: list[Host] = []
        self._services = backing.Stack(logs)  # Azurite and the Brevo sandbox
        self.connection = self._services.connection  # straight to Azurite, for the checks
        self.sandbox = self._services.sandbox
        services = self._services
        self.proxies = {
            "table": FaultProxy(services.table),
            "blob": FaultProxy(services.blob),
            "queue": FaultProxy(services.queue),
        }
        env = {
            **dev_settings(),
            **settings,
            "AzureWebJobsStorage": proxied(self.connection, **self.proxies),
            "BREVO_BASE_URL": f"{self.sandbox}/v3",
        }
        try:
            for proxy in self.proxies.values():
                proxy.start()
            for index in range(hosts):
                own = per_host[index] if index < len(per_host) else {}
                self.hosts.append(Host(index, {**env, **own}, logs))
                self.hosts[-1].start()
        except BaseException:
            self.stop()
            raise

    def live_url(self) -> str:
        return next(host.url for host in self.hosts if host.alive)

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        for proxy in self.proxies.values():
            proxy.stop()
        self._services.stop()

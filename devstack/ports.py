"""Free ports for the services the suite, the bench and the soak start: `free_ports` picks them
below the kernel's ephemeral range, where no outgoing connection can take one between the check
and the service's listen. Under pytest-xdist each worker draws from its own stripe of that range,
so a port one worker's fault proxy lets go of during an outage is never handed to another
worker's service, which would answer in its place."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_random = random.Random()
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def bindable(port: int) -> bool:
    """Whether a listener could take `port` on loopback now, with the options the services use."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Node and http.server listen
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stripe(pool: range) -> range:
    """This process's share of `pool`: all of it, or one xdist worker's slice of it."""
    worker, workers = (
        os.environ.get("PYTEST_XDIST_WORKER", ""),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT", ""),
    )
    if not (worker.startswith("gw") and worker[2:].isdigit() and workers.isdigit() and int(workers) > 1):
        return pool
    index, total = int(worker[2:]), int(workers)
    width = len(pool) // total
    return pool[index * width : (index + 1) * width] if index < total else pool


def free_ports(count: int = 1) -> int:
    """The first of `count` consecutive ports a service can listen on, chosen below the kernel's
    ephemeral range. A port the kernel hands out (bind to 0) can be taken, between the check and
    the service's listen, as the local end of any outgoing connection; one below the range
    cannot."""
    low, high = _ephemeral_range()
    pool = _stripe(range(10240, low - count) if low - count > 12288 else range(high + 1, 65536 - count))
    if len(pool) < 1024:  # the ephemeral range covers nearly everything: let the kernel choose
        return _kernel_port() if count == 1 else _kernel_ports(count)
    for _ in range(200):
        base = _random.choice(pool)
        ports = range(base, base + count)
        if not any(p in _handed_out for p in ports) and all(bindable(p) for p in ports):
            _handed_out.update(ports)
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kernel_ports(count: int) -> int:
    for _ in range(200):
        base = _kernel_port()
        if base + count <= 65536 and all(bindable(p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def free_port() -> int:
    return free_ports(1)

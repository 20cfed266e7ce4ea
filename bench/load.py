"""Load: two dev host processes on one Azurite, many buyers spread over 127.0.0.0/8, first all
fresh purchases, then half replays. BENCH_LOAD_SECONDS and BENCH_LOAD_CLIENTS scale it."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench.latency import percentiles
from bench.stack import address, keyed
from devstack.loopback import client_from
from devstack.services import Stack

LOAD_SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "10"))
LOAD_CLIENTS = int(os.environ.get("BENCH_LOAD_CLIENTS", "16"))


def run(stack: Stack) -> dict:
    hosts = [stack.start_host(), stack.start_host()]
    phases = {
        "fresh purchases": phase(hosts, replay_share=0.0),
        "half replays": phase(hosts, replay_share=0.5),
    }
    rss = [peak_rss_mb(host.proc.pid) for host in hosts]
    for host in hosts:  # their drainers would spend the contacts limit a later phase measures
        host.stop()
    return {
        "hosts": 2,
        "clients": LOAD_CLIENTS,
        "seconds_per_phase": LOAD_SECONDS,
        "phases": phases,
        "peak_rss_mb": rss,
    }


def phase(hosts, replay_share: float) -> dict:
    deadline = time.monotonic() + LOAD_SECONDS
    lock = threading.Lock()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    seen: list[tuple[str, dict]] = []

    def client(n: int) -> None:
        http = client_from(address())
        host = hosts[n % len(hosts)].url
        i = 0
        while time.monotonic() < deadline:
            i += 1
            if seen and i % 2 == 0 and replay_share:
                _, payload = seen[(n + i) % len(seen)]
            else:
                payload = keyed()
                http = client_from(address()) if i % 5 == 0 else http
            start = time.perf_counter()
            status: int | str  # the answer's status, or the exception that stood for it
            try:
                status = http.post(f"{host}/api/a2a/purchase", json=payload, timeout=30).status_code
            except requests.RequestException as exc:
                status = type(exc).__name__
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if status != 200:
                    errors[str(status)] += 1
                elif len(seen) < 2000:
                    seen.append((host, payload))

    with ThreadPoolExecutor(LOAD_CLIENTS) as pool:
        list(pool.map(client, range(LOAD_CLIENTS)))
    return {
        "requests": len(latencies),
        "per_second": round(len(latencies) / LOAD_SECONDS, 1),
        **percentiles(latencies),
        "errors": dict(errors),
    }


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0

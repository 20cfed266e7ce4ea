"""The soak's faults: a schedule drawn from the seed before the run starts, then played against the
stack in real time.

- Table and Blob: the fault proxies go `cut`, `stall` or `mute` (longer than the storage timeout,
  so calls time out; a muted write lands unanswered) or `refuse` for a second or few, now and
  then for longer than a call can wait, then back to `pass`.
- Brevo: the sandbox answers a few of the soak's calls (contacts, send, log) with a 5xx, a 429
  with Brevo's rate-limit headers, or late (past the store's Brevo timeout, after which it still
  sends); and it refuses (400) sends and upserts to the orders marked `refusable`, the only ones
  allowed a 502.
- Hosts: one is killed (SIGKILL) and restarted on its port a moment later.

The same seed gives the same schedule; what the load meets at each moment still depends on timing.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import requests

from soak.stack import Host, Stack

REFUSABLE = ".refusable."  # in the address of every order that may meet an injected Brevo refusal
BREVO_PATHS = ("/v3/contacts", "/v3/smtp/email", "/v3/smtp/emails")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds into the load
    target: str  # "table", "blob", "brevo" or "host"
    action: str  # a proxy mode; a Brevo fault kind; "kill"
    seconds: float = 0.0  # how long a proxy mode lasts, or a host stays down
    host: int = 0
    spec: dict = field(default_factory=dict, compare=False)  # the sandbox fault, for Brevo

    def describe(self) -> str:
        what = f"{self.target} {self.action}"
        if self.target == "host":
            what = f"host{self.host} kill, down {self.seconds:.1f}s"
        elif self.target == "brevo":
            what += f" {self.spec['path']} x{self.spec['times']}"
        else:
            what += f" {self.seconds:.1f}s"
        return f"{self.at:6.1f}s  {what}"


def schedule(seed: int, seconds: float, hosts: int, match: str, brevo_timeout: float) -> list[Fault]:
    rng = random.Random(f"{seed}/faults")
    faults = [
        *_proxy_faults(rng, "table", seconds),
        *_proxy_faults(rng, "blob", seconds),
        *_brevo_faults(rng, seconds, match, brevo_timeout),
        *_kills(rng, seconds, hosts),
    ]
    return sorted(faults, key=lambda fault: fault.at)


def _kinds(rng: random.Random, kinds: tuple[str, ...], weights: tuple[int, ...]):
    """Every kind once, in a seeded order, so even a short run meets each; then at random."""
    yield from rng.sample(kinds, len(kinds))
    while True:
        yield rng.choices(kinds, weights=weights)[0]


def _proxy_faults(rng: random.Random, target: str, seconds: float) -> list[Fault]:
    """Blips of a second or few, and outages longer than the storage clients' timeout plus their
    retry, which a call cannot wait out (the first of them early on)."""
    faults, at = [], rng.uniform(0.5, 2.0)
    modes = _kinds(rng, ("cut", "stall", "mute", "refuse"), (4, 4, 2, 1))
    while at < seconds:
        mode = next(modes)
        if rng.random() < 0.2 or len(faults) == 1:
            length = rng.uniform(6.0, 10.0)
        else:
            length = rng.uniform(2.0, 5.0) if mode in ("stall", "mute") else rng.uniform(1.0, 3.0)
        faults.append(Fault(at, target, mode, min(length, seconds - at)))
        at += length + rng.uniform(0.5, 3.0)
    return faults


def _brevo_faults(rng: random.Random, seconds: float, match: str, brevo_timeout: float) -> list[Fault]:
    faults, at = [], rng.uniform(0.5, 2.0)
    kinds = _kinds(rng, ("5xx", "429", "late", "refusal"), (4, 2, 3, 2))
    while at < seconds:
        kind = next(kinds)
        spec: dict = {"times": rng.randint(1, 4), "match": match}
        if kind == "5xx":
            spec.update(path=rng.choice(BREVO_PATHS), status=rng.choice((500, 502, 503)))
        elif kind == "429":
            reset = str(rng.randint(1, 3))
            spec.update(path=rng.choice(BREVO_PATHS), status=429, headers={"x-sib-ratelimit-reset": reset})
        elif kind == "late":
            delay = rng.uniform(0.5, 2.0) * brevo_timeout
            spec.update(path=rng.choice(BREVO_PATHS[:2]), status=0, delay_seconds=round(delay, 2))
        else:
            spec.update(
                path=rng.choice(BREVO_PATHS[:2]),
                status=400,
                match=REFUSABLE,
                body={"code": "invalid_parameter", "message": "refused by the soak"},
            )
        faults.append(Fault(at, "brevo", kind, spec=spec))
        at += rng.uniform(1.0, 3.0)
    return faults


def _kills(rng: random.Random, seconds: float, hosts: int) -> list[Fault]:
    faults, at = [], rng.uniform(3.0, 8.0)
    while at < seconds - 2:
        faults.append(Fault(at, "host", "kill", rng.uniform(0.2, 1.5), host=rng.randrange(hosts)))
        at += rng.uniform(6.0, 12.0)
    return faults


class Injector:
    """Plays a schedule against the stack on its own thread; `stop()` ends every fault."""

    def __init__(self, stack: Stack, faults: list[Fault]):
        self._stack = stack
        self._faults = faults
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._play, name="soak-faults", daemon=True)
        self._restarts: list[threading.Thread] = []
        self.applied: Counter[str] = Counter()
        self.errors: list[str] = []
        self.refusals_used = 0  # Brevo refusals the sandbox answered, known once stopped
        self._refusals_armed = 0
        self.down: dict[str, list[list[float]]] = {"table": [], "blob": []}  # [from, to] in load time

    def start(self, started: float) -> None:
        self._started = started
        self._thread.start()

    def _now(self) -> float:
        return time.monotonic() - self._started

    def both_down(self, start: float, end: float) -> bool:
        """Whether Table and Blob were both faulted at some moment between `start` and `end`."""
        return any(
            max(start, t0, b0) <= min(end, t1, b1)
            for t0, t1 in self.down["table"]
            for b0, b1 in self.down["blob"]
        )

    def _play(self) -> None:
        for fault in self._faults:
            if self._stopped.wait(max(0.0, self._started + fault.at - time.monotonic())):
                return
            try:
                self._apply(fault)
            except (OSError, requests.RequestException, RuntimeError) as exc:
                self.errors.append(f"{fault.describe()}: {exc}")
                continue
            self.applied[f"{fault.target} {fault.action}"] += 1
            if fault.action == "refusal":
                self._refusals_armed += fault.spec["times"]

    def _apply(self, fault: Fault) -> None:
        stack = self._stack
        if fault.target in ("table", "blob"):
            proxy = stack.table_proxy if fault.target == "table" else stack.blob_proxy
            proxy.set(fault.action, seconds=fault.seconds)
            self.down[fault.target].append([self._now(), self._now() + fault.seconds])
        elif fault.target == "brevo":
            requests.post(f"{stack.sandbox}/_sandbox/faults", json=fault.spec, timeout=10).raise_for_status()
        else:
            host = stack.hosts[fault.host]
            if not host.alive:
                raise RuntimeError("already down")
            host.kill()
            restart = threading.Timer(fault.seconds, self._restart, (host, fault))
            restart.start()
            self._restarts.append(restart)

    def _restart(self, host: Host, fault: Fault) -> None:
        try:
            host.start()
        except RuntimeError as exc:  # it stays down; stop() tries again
            self.errors.append(f"{fault.describe()}: restart failed: {str(exc)[:200]}")

    def stop(self) -> None:
        """No more faults: proxies pass, Brevo's pending faults are dropped, every host is up."""
        self._stopped.set()
        self._thread.join()
        for restart in self._restarts:
            restart.join()
        self._stack.table_proxy.set("pass")
        self._stack.blob_proxy.set("pass")
        for window in (w for windows in self.down.values() for w in windows):
            window[1] = min(window[1], self._now())
        faults = f"{self._stack.sandbox}/_sandbox/faults"
        pending = requests.get(faults, timeout=10).json()
        self.refusals_used = self._refusals_armed - sum(f["times"] for f in pending if f["status"] == 400)
        requests.delete(faults, timeout=10).raise_for_status()
        for host in self._stack.hosts:
            if not host.alive:
                host.start()

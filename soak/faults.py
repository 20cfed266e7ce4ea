"""The soak's faults: a schedule drawn from the seed before the run starts, then played against the
stack in real time. The fault proxies cut, stall, mute or refuse Table, Blob and the contact queue;
the sandbox answers Brevo calls with 5xx, 429 or late, refuses the orders marked `refusable`, and
storms on the contacts family; hosts are killed (SIGKILL) and restarted, the first mid-drain. Faults
that fail a drain run are spaced `DRAIN_FAILURE_GAP` apart. The same seed gives the same schedule;
what the load meets at each moment still depends on timing. Each fault in full:
docs/development.md#soak.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import requests

from soak.stack import Host, Stack

REFUSABLE = ".refusable."  # in the address of every order that may meet an injected Brevo refusal
CREATE, IMPORT, SEND, LOG = "/v3/contacts", "/v3/contacts/import", "/v3/smtp/email", "/v3/smtp/emails"
CONTACT_PATHS = (CREATE, IMPORT)  # the drainer's calls: one by one, or a batch into a list
BREVO_PATHS = (*CONTACT_PATHS, SEND, LOG)
STORES = ("table", "blob", "queue")  # the fault proxies in front of Azurite
DRAIN_FAILURE_GAP = 45.0  # seconds between faults that fail a drain run (its pause starts at 30 s)
DRAIN_HOLD_SECONDS = 1.0  # how long Brevo holds a killed drain run's call (inside the Brevo timeout)
DRAIN_KILL_WINDOW = 25.0  # how long the kill mid-drain may wait for a run with a batch to kill
DRAIN_STORM_CALLS = 2  # contacts calls answered 429 just before the held one
DRAIN_STORM_LEAD = 15.0  # no scheduled storm from this long before the kill mid-drain
DRAIN_LAST_CHANCE = 3.0  # seconds before its deadline the kill takes a run in any contacts call
DRAIN_QUIET_SECONDS = 8.0  # Table and the queue left alone from a second before the kill mid-drain


@dataclass(frozen=True)
class Fault:
    at: float  # seconds into the load
    target: str  # "table", "blob", "queue", "brevo" or "host"
    action: str  # a proxy mode; a Brevo fault kind; "kill" or "kill draining"
    seconds: float = 0.0  # how long a proxy mode lasts, or a host stays down
    host: int = 0
    spec: dict = field(default_factory=dict, compare=False)  # the sandbox fault, for Brevo

    def describe(self) -> str:
        what = f"{self.target} {self.action}"
        if self.target == "host":
            what = f"host{self.host} {self.action}, down {self.seconds:.1f}s"
            if self.action == "kill draining":
                what += f", {self.spec['after']:.2f}s into its call to Brevo"
        elif self.action == "storm":
            spell = f"{self.spec['seconds']}s" if "seconds" in self.spec else f"x{self.spec['times']}"
            what += f" {self.spec['family']} {spell}"
        elif self.target == "brevo":
            what += f" {self.spec['path']} x{self.spec['times']}"
        else:
            what += f" {self.seconds:.1f}s"
        return f"{self.at:6.1f}s  {what}"


def schedule(seed: int, seconds: float, hosts: int, match: str, brevo_timeout: float) -> list[Fault]:
    rng = random.Random(f"{seed}/faults")
    kills = _kills(rng, seconds, hosts, match)
    draining = kills[0].at if kills else None
    proxies = [fault for store in STORES for fault in _proxy_faults(rng, store, seconds)]
    faults = [
        *(proxies if draining is None else _quiet(proxies, draining - 1.0, draining + DRAIN_QUIET_SECONDS)),
        *_brevo_faults(rng, seconds, match, brevo_timeout, draining),
        *kills,
    ]
    return sorted(faults, key=lambda fault: fault.at)


def _quiet(faults: list[Fault], start: float, end: float) -> list[Fault]:
    """The proxy faults with Table and the queue (what a drain run needs) passing from `start` to
    `end`: a fault that begins before is cut short, one that begins within is left out."""
    kept = []
    for fault in faults:
        if fault.target == "blob" or fault.at + fault.seconds <= start or fault.at >= end:
            kept.append(fault)
        elif start - fault.at >= 0.5:
            kept.append(replace(fault, seconds=start - fault.at))
    return kept


def _kinds(rng: random.Random, kinds: tuple[str, ...], weights: tuple[int, ...]):
    """Every kind once, in a seeded order, so even a short run meets each; then at random."""
    yield from rng.sample(kinds, len(kinds))
    while True:
        yield rng.choices(kinds, weights=weights)[0]


def _proxy_faults(rng: random.Random, target: str, seconds: float) -> list[Fault]:
    """Blips of a second or few, and outages longer than the storage clients' timeout plus their
    retry, which a call cannot wait out (the first of them early on)."""
    faults: list[Fault] = []
    at = rng.uniform(0.5, 2.0)
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


def _brevo_faults(
    rng: random.Random, seconds: float, match: str, brevo_timeout: float, draining: float | None
) -> list[Fault]:
    """Brevo faults every 1 to 3 s; the first refusal is a send's (the only refusal a buyer sees).
    One that would fail a drain run goes to the send instead when it comes less than
    `DRAIN_FAILURE_GAP` after the last, or when its pause could still hold the drainer back at the
    kill mid-drain (`draining`) or during that kill's wait for a run to kill; a storm then would
    keep the run from the call the kill waits for, so it is a 429 on the send instead."""
    faults, at, last_failing, refused = [], rng.uniform(0.5, 2.0), -DRAIN_FAILURE_GAP, False
    kinds = _kinds(rng, ("5xx", "429", "late", "refusal", "storm"), (4, 2, 3, 2, 2))
    while at < seconds:
        kind = next(kinds)
        spec = _brevo_spec(rng, kind, match, brevo_timeout)
        if kind == "refusal" and not refused:
            spec["path"], refused = SEND, True
        if kind == "storm" and _near(at, draining, DRAIN_STORM_LEAD):
            kind, spec = "429", {"path": SEND, "status": 429, "times": spec.get("times", 1), "match": match}
        if _fails_a_drain(spec, brevo_timeout):
            if at - last_failing < DRAIN_FAILURE_GAP or _near(at, draining, DRAIN_FAILURE_GAP):
                spec["path"] = SEND
            else:
                last_failing, spec["times"] = at, 1
        faults.append(Fault(at, "brevo", kind, spec=spec))
        at += rng.uniform(1.0, 3.0)
    return faults


def _near(at: float, draining: float | None, lead: float) -> bool:
    """Whether `at` falls from `lead` seconds before the kill mid-drain to the end of its wait."""
    return draining is not None and -lead < at - draining < DRAIN_KILL_WINDOW


def _brevo_spec(rng: random.Random, kind: str, match: str, brevo_timeout: float) -> dict:
    """What the sandbox is asked for (`POST /_sandbox/faults`)."""
    if kind == "storm":
        if rng.random() < 0.5:
            return {"family": "contacts", "seconds": round(rng.uniform(2.0, 8.0), 1)}
        return {"family": "contacts", "times": rng.randint(2, 10)}
    spec: dict = {"times": rng.randint(1, 4), "match": match}
    if kind == "5xx":
        spec.update(path=rng.choice(BREVO_PATHS), status=rng.choice((500, 502, 503)))
    elif kind == "429":
        reset = str(rng.randint(1, 3))
        spec.update(path=rng.choice(BREVO_PATHS), status=429, headers={"x-sib-ratelimit-reset": reset})
    elif kind == "late":
        delay = rng.uniform(0.5, 2.0) * brevo_timeout
        spec.update(path=rng.choice((*CONTACT_PATHS, SEND)), status=0, delay_seconds=round(delay, 2))
    else:
        spec.update(
            path=rng.choice((*CONTACT_PATHS, SEND, SEND)),
            status=400,
            match=REFUSABLE,
            body={"code": "invalid_parameter", "message": "refused by the soak"},
        )
    return spec


def _fails_a_drain(spec: dict, brevo_timeout: float) -> bool:
    """Whether the drainer's call meeting this fault ends its run as a failure (then it pauses).
    A 429 is waited out; a create refused poisons one buyer and the run goes on."""
    if spec.get("path") not in CONTACT_PATHS:
        return False
    status = spec.get("status") or 0
    late = spec.get("delay_seconds", 0) > brevo_timeout
    return status >= 500 or late or (status == 400 and spec["path"] == IMPORT)


def _kills(rng: random.Random, seconds: float, hosts: int, match: str) -> list[Fault]:
    """The kill mid-drain, a quarter to two fifths into the load (after the stores' first long
    outages), and none before it: a kill then could leave the lease to a dead run for a minute.
    Then a kill every 6 to 12 s."""
    faults: list[Fault] = []
    at = min(max(rng.uniform(0.25, 0.4) * seconds, 6.0), 40.0)
    while at < seconds - 2:
        down, host = rng.uniform(0.2, 1.5), rng.randrange(hosts)
        if faults:
            faults.append(Fault(at, "host", "kill", down, host=host))
        else:
            after = round(rng.uniform(0.0, 0.6) * DRAIN_HOLD_SECONDS, 2)
            faults.append(Fault(at, "host", "kill draining", down, host, {"after": after, "match": match}))
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
        self.refusals_used: Counter[str] = Counter()  # per path, Brevo refusals answered (once stopped)
        self._refusals_armed: Counter[str] = Counter()
        self.drain_kills: Counter[str] = Counter()  # how the kill mid-drain went: "while draining", ...
        self._draining = threading.Event()  # set while the kill mid-drain waits for a run to kill
        self.down: dict[str, list[list[float]]] = {store: [] for store in STORES}  # [from, to] in load time

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
            if fault.target == "host" and self._draining.is_set():
                # a kill now could take the very run the kill mid-drain waits for, and the lease
                self.drain_kills["other kills held back meanwhile"] += 1
                continue
            if fault.action == "kill" and not self._stack.hosts[fault.host].alive:
                self.drain_kills["other kills skipped: the host was down already"] += 1
                continue
            try:
                self._apply(fault)
            except (OSError, requests.RequestException, RuntimeError) as exc:
                self.errors.append(f"{fault.describe()}: {exc}")
                continue
            self.applied[f"{fault.target} {fault.action}"] += 1
            if fault.action == "refusal":
                self._refusals_armed[fault.spec["path"]] += fault.spec["times"]

    def _apply(self, fault: Fault) -> None:
        stack = self._stack
        if fault.target in STORES:
            stack.proxies[fault.target].set(fault.action, seconds=fault.seconds)
            self.down[fault.target].append([self._now(), self._now() + fault.seconds])
        elif fault.target == "brevo":
            self._brevo_fault(fault.spec)
        elif fault.action == "kill draining":
            self._draining.set()
            killing = threading.Thread(target=self._kill_draining, args=(fault,))
            killing.start()
            self._restarts.append(killing)
        else:
            self._kill(stack.hosts[fault.host], fault)

    def _brevo_fault(self, spec: dict) -> int:
        """Have the sandbox apply a fault; its id."""
        response = requests.post(f"{self._stack.sandbox}/_sandbox/faults", json=spec, timeout=10)
        response.raise_for_status()
        return response.json()["id"]

    def _kill(self, host: Host, fault: Fault) -> None:
        host.kill()
        restart = threading.Timer(fault.seconds, self._restart, (host, fault))
        restart.start()
        self._restarts.append(restart)

    def _kill_draining(self, fault: Fault) -> None:
        """Kill a host while its drainer hands a batch to Brevo: Brevo holds the drainer's next
        contacts call a moment (the call goes through once the hold ends, its caller dead or not),
        the hosts take turns running the drainer (the admin API answers once the run is over), and
        the kill comes `after` seconds into the call. Runs that answer without calling Brevo
        (nothing waits, another instance holds the lease, a pause, a store down) are asked again
        for `DRAIN_KILL_WINDOW` seconds; then the scheduled host is killed all the same."""
        try:
            deadline = time.monotonic() + DRAIN_KILL_WINDOW
            host = self._catch_draining(fault, deadline)
        except requests.RequestException as exc:
            self.errors.append(f"{fault.describe()}: {exc}")
            host = None
        finally:
            self._draining.clear()
        caught = "while draining" if host is not None else "without a batch in flight"
        host = host or self._stack.hosts[fault.host]
        if self._stopped.is_set():
            self.drain_kills["not made: the load ended first"] += 1
        elif host.alive:
            self.drain_kills[caught] += 1
            self._kill(host, fault)

    def _catch_draining(self, fault: Fault, deadline: float) -> Host | None:
        """The host whose drain run is still going `after` seconds into a held call to Brevo's
        contacts endpoints (in the last `DRAIN_LAST_CHANCE` seconds, into any contacts call: a
        storm's, say), the hosts running the drainer in turn; None when no run got there by the
        deadline."""
        hosts = self._stack.hosts
        turn = fault.host
        while time.monotonic() < deadline and not self._stopped.is_set():
            holds = self._hold_contact_calls(fault.spec["match"])
            host, turn = hosts[turn % len(hosts)], turn + 1
            calls = self._contact_calls()
            run = threading.Thread(target=host.run_function, args=("drain_contacts",), daemon=True)
            run.start()
            while run.is_alive() and time.monotonic() < deadline:
                last_chance = deadline - time.monotonic() < DRAIN_LAST_CHANCE
                if not holds <= self._pending_ids() or (last_chance and self._contact_calls() > calls):
                    self._stopped.wait(fault.spec["after"])
                    if run.is_alive():
                        return host
                    break
                self._stopped.wait(0.05)
            self._stopped.wait(0.5)
        return None

    def _hold_contact_calls(self, match: str) -> set[int]:
        """A storm of `DRAIN_STORM_CALLS` on the contacts family, then a hold on each contacts path
        (whichever way the draining host creates contacts): the run waits the storm out, then its
        call is held. What is already waiting is left; the holds' ids."""
        pending = requests.get(f"{self._stack.sandbox}/_sandbox/faults", timeout=10).json()
        if not any(f["family"] == "contacts" for f in pending):
            self._brevo_fault({"family": "contacts", "times": DRAIN_STORM_CALLS})
            self.applied["brevo storm"] += 1
        holds = {f["path"]: f["id"] for f in pending if f["delay_seconds"] == DRAIN_HOLD_SECONDS}
        for path in CONTACT_PATHS:
            if path not in holds:
                spec = {"path": path, "delay_seconds": DRAIN_HOLD_SECONDS, "times": 1, "match": match}
                holds[path] = self._brevo_fault(spec)
        return set(holds.values())

    def _pending_ids(self) -> set[int]:
        return {f["id"] for f in requests.get(f"{self._stack.sandbox}/_sandbox/faults", timeout=10).json()}

    def _contact_calls(self) -> int:
        stats = requests.get(f"{self._stack.sandbox}/_sandbox/stats", timeout=10).json()
        return sum(stats["requests"].get(path, 0) for path in CONTACT_PATHS)

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
        for proxy in self._stack.proxies.values():
            proxy.set("pass")
        for window in (w for windows in self.down.values() for w in windows):
            window[1] = min(window[1], self._now())
        faults = f"{self._stack.sandbox}/_sandbox/faults"
        pending: Counter[str] = Counter()
        for left in requests.get(faults, timeout=10).json():
            if left["status"] == 400:
                pending[left["path"]] += left["times"]
        self.refusals_used = Counter({path: n - pending[path] for path, n in self._refusals_armed.items()})
        requests.delete(faults, timeout=10).raise_for_status()
        for host in self._stack.hosts:
            if not host.alive:
                host.start()

"""Child processes that never outlive the process that started them (`make run`, the test suite).

Each child leads a process group of its own, so stopping it reaches whatever it started in turn
(`func start`'s workers, `npx`'s node). On Linux the kernel also sends it SIGTERM when its parent
dies, even by SIGKILL (prctl PR_SET_PDEATHSIG). `stop_all` ends every child still running, and
`interrupt_on_signals` makes SIGTERM, and a SIGINT a background job inherits ignored, end the
program like Ctrl-C, so that its cleanup runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
_started: list[subprocess.Popen] = []


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()  # looked up once, never between fork and exec


def _tie_to(parent: int) -> Callable[[], None]:
    """Run in the child before exec: SIGTERM when the parent dies, and exit now if it already
    has (its death came before the request)."""
    prctl = _PRCTL

    def tie() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return tie


def start(args: list[str], **popen: Any) -> subprocess.Popen:
    """`subprocess.Popen(args, **popen)` as the leader of a new process group, ended by the
    kernel when this process dies. The tie is to the calling thread on Linux, so a child started
    from another thread, which may end first, is only tied by `stop_all`."""
    on_main = threading.current_thread() is threading.main_thread()
    preexec = _tie_to(os.getpid()) if on_main else None
    proc = subprocess.Popen(args, start_new_session=True, preexec_fn=preexec, **popen)
    _started.append(proc)
    return proc


def stop(*procs: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to each child's group at once, SIGKILL to what is left after `grace` seconds;
    each child is reaped, its exit status in `returncode`."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in running:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        # Just reaped, its pid is not reused yet: whatever of its group ignored SIGTERM goes now.
        _signal_group(proc.pid, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(ValueError):
            _started.remove(proc)


def stop_all(grace: float = 10.0) -> None:
    """Stop every child `start` started that still runs, newest first, then end any other
    descendant of this process (on Linux, where /proc lists them)."""
    stop(*reversed(_started), grace=grace)
    leftover = descendants(os.getpid())
    for pid in leftover:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while leftover and time.monotonic() < deadline:
        time.sleep(0.05)
        leftover = [pid for pid in leftover if alive(pid)]
    for pid in leftover:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _parent_and_state(pid: str) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, parent = stat[stat.rfind(")") + 2 :].split()[:2]
    return int(parent), state


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not reaped, does not)."""
    if Path("/proc/self").exists():
        found = _parent_and_state(str(pid))
        return found is not None and found[1] not in "ZX"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def descendants(pid: int) -> list[int]:
    """The running descendants of `pid`, children first; empty where there is no /proc."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        found = _parent_and_state(entry.name) if entry.name.isdigit() else None
        if found is not None and found[1] not in "ZX":
            children.setdefault(found[0], []).append(int(entry.name))
    ordered, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        ordered.append(child)
        queue.extend(children.get(child, []))
    return ordered


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def interrupt_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, as Ctrl-C does in a
    terminal. A program started in the background (`make run &`, nohup, a script) inherits
    SIGINT ignored, and Python then installs no handler of its own for it."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)

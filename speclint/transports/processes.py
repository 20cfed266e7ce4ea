"""A stdio server's processes: started as the leader of a new process group, its stderr drained on
a thread, and stopped as the MCP stdio transport asks (close stdin, wait, SIGTERM, wait, SIGKILL),
to the whole group and to any descendant that left it (found in /proc on Linux). POSIX only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from speclint.load import Unreadable, one_line

STDERR_TAIL_CHARS = 300
CLOSE_GRACE_SECONDS = 2.0  # after closing stdin, before SIGTERM
TERM_GRACE_SECONDS = 2.0  # after SIGTERM, before SIGKILL
KILL_WAIT_SECONDS = 2.0  # after SIGKILL, before giving up on the group
SHUTDOWN_FLOOR_SECONDS = 0.25  # the least each wait gets once the deadline has passed
PIPE_CHUNK_BYTES = 1 << 16  # one read from a pipe


class Tail:
    """Drains a stream on its own thread and keeps its end: a chatty server never fills the pipe."""

    def __init__(self, stream: IO[bytes], keep: int = 4096):
        self._data = bytearray()
        self._keep = keep
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(PIPE_CHUNK_BYTES):
                with self._lock:
                    self._data += chunk
                    del self._data[: -self._keep]

    def said(self, wait: float = 0.0) -> str:
        """The last words on the stream as "; stderr: ...", or "" if none; waits up to `wait` for its end."""
        self._thread.join(wait)
        with self._lock:
            text = self._data.decode("utf-8", errors="replace")
        tail = one_line(text, len(text))[-STDERR_TAIL_CHARS:]
        return f"; stderr: {tail}" if tail else ""


def pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """A pipe of a process started with it set to subprocess.PIPE, which Popen types as optional."""
    if stream is None:
        raise ValueError("the process was started without this pipe")
    return stream


def start(command: list[str], env: dict[str, str] | None, name: str) -> subprocess.Popen[bytes]:
    """The server as the leader of a new process group (its pid is the group's id)."""
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
        )
    except FileNotFoundError:
        raise Unreadable(f"cannot start {name}: {command[0]} not found") from None
    except PermissionError:
        raise Unreadable(f"cannot start {name}: {command[0]} is not executable") from None
    except OSError as exc:
        raise Unreadable(f"cannot start {name}: {exc.strerror or exc}") from None


def exit_status(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-returncode).name}"
        return f"signal {-returncode}"
    return f"status {returncode}"


def stop_group(
    process: subprocess.Popen, escaped: dict[int, str] | None = None, deadline: float | None = None
) -> None:
    """Wait for the group to end, then SIGTERM it, then SIGKILL it; the leader is always reaped.
    `escaped` processes (descendants in another group, by pid and start time) are signalled too;
    with a `deadline`, the waits before SIGKILL are cut to what is left of it (at least
    SHUTDOWN_FLOOR_SECONDS each)."""
    escaped = dict(escaped or {})
    steps = (
        (None, CLOSE_GRACE_SECONDS),
        (signal.SIGTERM, TERM_GRACE_SECONDS),
        (signal.SIGKILL, KILL_WAIT_SECONDS),
    )
    for signal_number, grace in steps:
        if process.poll() is None:  # a server may start such a child as it is being stopped
            escaped.update(descendants_outside_group(process.pid))
        if signal_number is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal_number)
            for pid, started in escaped.items():
                if start_time(pid) == started:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal_number)
        if deadline is not None and signal_number != signal.SIGKILL:
            grace = min(grace, max(deadline - time.monotonic(), SHUTDOWN_FLOOR_SECONDS))
        if group_ended(process, grace, escaped):
            return


def group_ended(process: subprocess.Popen, grace: float, escaped: dict[int, str] | None = None) -> bool:
    """Whether the leader (reaped here), every other process of its group and every `escaped`
    one end within `grace`."""
    deadline = time.monotonic() + grace
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        return False
    while group_running(process.pid) or any(
        start_time(pid) == started and running(pid) for pid, started in (escaped or {}).items()
    ):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (state, ppid, pgrp, ...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """When `pid` started, in clock ticks since boot: a pid reused by another process differs."""
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def running(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields and fields[0] not in "ZX")


def descendants_outside_group(leader: int) -> dict[int, str]:
    """The leader's descendants that left its process group (setsid, a new session), by pid and
    start time: a signal to the group does not reach them. Found through /proc (Linux) while
    their parents live; a daemon whose parent already exited is out of reach."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    children: dict[str, list[str]] = {}
    groups: dict[str, str] = {}
    for entry in proc.iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields and len(fields) > 19:
            children.setdefault(fields[1], []).append(entry.name)
            groups[entry.name] = fields[2]
    found: dict[int, str] = {}
    queue = list(children.get(str(leader), []))
    while queue:
        pid = queue.pop()
        queue.extend(children.get(pid, []))
        if groups.get(pid) != str(leader) and (started := start_time(int(pid))) is not None:
            found[int(pid)] = started
    return found


def group_running(pgid: int) -> bool:
    """Whether a process of the group runs; zombies that an init which never reaps keeps (as in
    some containers) do not count, where /proc shows them."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields and fields[2] == str(pgid) and fields[0] not in "ZX":
            return True
    return False

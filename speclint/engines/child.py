"""The engines' compiles in a child process, under a budget of time and memory.

Native code cannot be interrupted from Python, and a schema can be built to blow up a compile, so
one child (``sys.executable -c`` with the parent's ``sys.path``) compiles every schema of a run and
says on stdout where it is. The parent kills it when a compile outlasts ``Limits.engine_seconds``
or the deadline passes; the child caps its own address space (RLIMIT_AS). A compile stopped,
out of memory or crashing is an SL004 problem of that schema, and a fresh child goes on; a
deadline that passes is ``Unreadable``. docs/speclint.md, "Limits", has the why. POSIX only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from speclint.engines.nodes import REJECTED, Problem, one_line
from speclint.engines.runs import MODULES, Said, merged, run_engine
from speclint.limits import Deadline, Limits, human
from speclint.load import Unreadable
from speclint.transports.processes import Tail, exit_status, pipe

BASE = "/inputSchema"
MEMORY_EXIT = 3  # the child's status when Python itself runs out of memory
MESSAGE_CHARS = 2000  # of one engine message, as the child sends it
IDLE_SECONDS = 60.0  # the child's start-up and the reading of a schema, when no deadline is nearer
_BOOT = "import sys; sys.path[:] = sys.argv[2:]; from speclint.engines.child import serve; serve(sys.argv[1])"
_FIX = (
    "make the schema cheap to compile: a pattern whose free-form part ([ab]*, .*) comes before a "
    "long fixed run ([ab][ab][ab]…) needs an automaton that doubles with each character of the "
    "run; put the fixed run first, shorten it, or check it on the server instead"
)


@dataclass
class Compiled:
    """What the engines made of one schema: what they said, merged, and the compiles that did
    not finish (over their budget, out of memory, crashed)."""

    said: list[tuple[str, Said]] = field(default_factory=list)
    stopped: list[Problem] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return merged(self.said)


@dataclass(frozen=True)
class _At:
    """The compile under way: which schema, which engine, where in it, since when."""

    tool: int
    engine: int
    path: str
    since: float


def compile_schemas(
    schemas: list[object],
    engines: list[str],
    limits: Limits | None = None,
    deadline: Deadline | None = None,
    labels: list[str] | None = None,
) -> list[Compiled]:
    """Every schema compiled by every engine of `engines`, each compile within `limits`, all
    before `deadline` (else ``Unreadable``); `labels` name the schemas' tools in that message."""
    limits = limits or Limits()
    labels = labels or [f"tool #{index}" for index in range(len(schemas))]
    results = [Compiled() for _ in schemas]
    if not schemas or not engines:
        return results
    with tempfile.TemporaryFile() as jobs:
        for schema in schemas:
            jobs.write(json.dumps(schema).encode() + b"\n")
        start: tuple[int, int] | None = (0, 0)
        while start is not None:
            jobs.seek(0)
            child = _Child(jobs, start, len(schemas), engines, limits, deadline)
            try:
                start = child.run(results, labels)
            finally:
                child.stop()
    return results


class _Child:
    """One child process compiling the schemas in `jobs` from `start` (schema, engine) on."""

    def __init__(
        self,
        jobs,
        start: tuple[int, int],
        count: int,
        engines: list[str],
        limits: Limits,
        deadline: Deadline | None,
    ):
        self.engines = engines
        self.limits = limits
        self.deadline = deadline
        self.count = count
        cpu = None if deadline is None else math.ceil(max(deadline.left(), 0)) + 1
        config = {"start": start, "engines": engines, "memory": limits.engine_memory, "cpu": cpu}
        if not sys.executable:
            raise Unreadable("--engines needs the path of the Python running speclint, and it is unknown")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(config), *sys.path],
                stdin=jobs,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise Unreadable(f"cannot start the engines' process: {exc.strerror or exc}") from None
        self.stdout = pipe(self.process.stdout)
        self.stderr = Tail(pipe(self.process.stderr))
        self.buffer = bytearray()
        self.ready = selectors.DefaultSelector()
        self.ready.register(self.stdout, selectors.EVENT_READ)

    def run(self, results: list[Compiled], labels: list[str]) -> tuple[int, int] | None:
        """Read the child until it is done (None) or a compile is stopped: then the (schema,
        engine) a fresh child starts from, if any is left."""
        at: _At | None = None
        heard = time.monotonic()
        while True:
            until = at.since + self.limits.engine_seconds if at else heard + IDLE_SECONDS
            if self.deadline is not None:
                until = min(until, self.deadline.at)
            line = self._line(until)
            if line is None and self.deadline is not None and self.deadline.passed():
                doing = "starting the engines" if at is None else self._doing(at, labels)
                raise Unreadable(self.deadline.missed(doing))
            if line is None and at is None:
                silent = f"the engines' process said nothing for {IDLE_SECONDS:g} s"
                raise Unreadable(silent + self.stderr.said())
            if line is None or line == b"":
                return self._stopped(at, results, line is None)
            heard = time.monotonic()
            try:
                message = json.loads(line)
                tool, engine = message["tool"], message["engine"]
            except (ValueError, TypeError, KeyError):
                wrote = one_line(line[:80].decode(errors="replace"))
                raise Unreadable(f"the engines' process wrote {wrote!r}, not its report") from None
            if "at" in message:
                # the same compile still under way keeps its start; a new one starts now
                since = at.since if at is not None and (at.tool, at.engine) == (tool, engine) else heard
                at = _At(tool, engine, message["at"], since)
            else:
                results[tool].said.extend((self.engines[engine], tuple(said)) for said in message["said"])
                at = None

    def _stopped(self, at: _At | None, results: list[Compiled], overtime: bool) -> tuple[int, int] | None:
        """The child was stopped (`overtime`) or ended during `at`: a problem of that schema."""
        if overtime:
            self.stop()
        returncode = self.process.wait()
        if at is None:
            if returncode == 0:
                return None
            failed = f"the engines' process failed ({exit_status(returncode)})"
            raise Unreadable(failed + self.stderr.said(0.5))
        engine = self.engines[at.engine]
        if overtime:
            what = (
                f"did not finish compiling within its budget of {self.limits.engine_seconds:.3g} s and "
                "was stopped; a local runtime compiling this schema stalls too"
            )
        elif returncode == MEMORY_EXIT or "memory allocation" in self.stderr.said(0.5):
            what = (
                f"ran out of its memory budget ({human(self.limits.engine_memory)}) compiling and was "
                "stopped; a local runtime compiling this schema needs as much"
            )
        else:
            what = (
                f"crashed compiling ({exit_status(returncode)}); a local runtime compiling this schema "
                "fails too"
            )
        message = one_line(f"{engine}: {what}")
        results[at.tool].stopped.append(Problem(at.path, (engine,), REJECTED, message, _FIX))
        if at.engine + 1 < len(self.engines):
            return at.tool, at.engine + 1
        return (at.tool + 1, 0) if at.tool + 1 < self.count else None

    def _doing(self, at: _At, labels: list[str]) -> str:
        return f"compiling the input schema of {labels[at.tool]} with {self.engines[at.engine]}"

    def _line(self, until: float) -> bytes | None:
        """The child's next line; b"" once it closes stdout, None if nothing comes by `until`."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                return line
            left = until - time.monotonic()
            if left <= 0:
                return None
            if self.ready.select(left):
                chunk = os.read(self.stdout.fileno(), 1 << 16)
                if not chunk:
                    return b""
                self.buffer += chunk

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.ready.unregister(self.stdout)
            self.stdout.close()


# ---------------------------------------------------------------- the child's side


def serve(config_text: str) -> None:
    """Compile the schemas on stdin (one JSON a line) from the configured start on, saying
    before each compile where it is and after each engine what it said."""
    config = json.loads(config_text)
    _limit(config["memory"], config["cpu"])
    report = os.fdopen(os.dup(1), "wb")  # the parent reads this; whatever else prints goes to stderr
    os.dup2(2, 1)
    engines: list[str] = config["engines"]
    first_tool, first_engine = config["start"]
    try:
        for engine in engines:  # imported before any compile's budget starts
            importlib.import_module(MODULES[engine])
        for tool, line in enumerate(sys.stdin.buffer):
            if tool < first_tool:
                continue
            text = line.decode().strip()
            schema = json.loads(text)
            for number, engine in enumerate(engines):
                if tool == first_tool and number < first_engine:
                    continue

                def step(path: str, tool: int = tool, number: int = number) -> None:
                    _send(report, {"tool": tool, "engine": number, "at": path})

                said = [
                    (path, impact, message[:MESSAGE_CHARS])
                    for path, impact, message in run_engine(engine, text, schema, BASE, step)
                ]
                _send(report, {"tool": tool, "engine": number, "said": said})
    except MemoryError:
        os._exit(MEMORY_EXIT)


def _limit(memory: int, cpu: int | None) -> None:
    """Cap this process's address space, and its CPU time at the run's deadline (should the
    parent be gone, nobody else would stop it)."""
    try:
        import resource
    except ImportError:  # not POSIX: the parent's wall clock is the only limit
        return
    for kind, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu)):
        if value is None:
            continue
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        with contextlib.suppress(ValueError, OSError):  # a platform that refuses: the wall clock holds
            resource.setrlimit(kind, (value, value if kind == resource.RLIMIT_AS else hard))


def _send(report, message: dict) -> None:
    report.write(json.dumps(message).encode() + b"\n")
    report.flush()

"""speclint's stdio client: start an MCP server as a child process, list its tools, stop it.

Newline-delimited JSON-RPC 2.0 on the server's stdin and stdout, in the revision
``speclint.protocol.negotiate`` settles on, every ``tools/list`` page within one deadline; then
the server is stopped with its process group (``speclint.transports.processes``). Lines that are
not JSON-RPC (up to ``MAX_NOISE_BYTES``), notifications and late answers to an abandoned probe are
skipped; the server's own requests are answered. A server that ends on the probe is started again
for the handshake. Whatever goes wrong is one ``Unreadable`` line (docs/speclint.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import subprocess
import time
from collections.abc import Mapping

from speclint.limits import Limits, human
from speclint.load import Listing, NotFinite, Unreadable, loads, one_line, rpc_error_text
from speclint.protocol import negotiate
from speclint.protocol.wire import METHOD_NOT_FOUND, Ended, Garbled, Refused, TimedOut
from speclint.transports.processes import (
    CLOSE_GRACE_SECONDS,
    PIPE_CHUNK_BYTES,
    SHUTDOWN_FLOOR_SECONDS,
    Tail,
    descendants_outside_group,
    exit_status,
    pipe,
    start,
    stop_group,
)

MAX_LINE_BYTES = 16 << 20  # one message; a longer line is an error, never an ever-growing buffer
MAX_NOISE_BYTES = 1 << 20  # stdout that is not JSON-RPC, skipped before giving up


def list_tools(
    command: list[str], timeout: float, env: dict[str, str] | None = None, limits: Limits | None = None
) -> Listing:
    """Every tool the stdio server started by `command` lists, each as the server sent it.

    `timeout` bounds the whole exchange, from start-up to the last page; `env` holds variables set
    for the server on top of speclint's own environment (as MCP clients' "env" settings do);
    `limits` caps the bytes read from its stdout and the tools listed."""
    deadline = time.monotonic() + timeout
    limits = limits or Limits()
    with StdioServer(command, timeout, env, deadline, limits.bytes) as server:
        try:
            return negotiate.list_tools(server, limits=limits)
        except Ended as exc:
            if exc.method != "server/discover":
                raise
    # It ended on the probe, as servers that take any request before initialize as fatal do:
    # the fallback needs a server that answers, so a fresh one gets the handshake.
    with StdioServer(command, timeout, env, deadline, limits.bytes) as server:
        return negotiate.list_tools(server, probe=False, limits=limits)


class StdioServer:
    """One server process, spoken to in JSON-RPC against one deadline and stopped on leaving."""

    def __init__(
        self,
        command: list[str],
        timeout: float,
        env: dict[str, str] | None = None,
        deadline: float | None = None,
        max_bytes: int | None = None,
    ):
        if not command:
            raise Unreadable("no server command given")
        self.name = f"`{one_line(shlex.join(command), 120)}`"
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if deadline is None else deadline
        self._until = self.deadline  # the current request's own deadline
        self._abandoned: set[int] = set()  # requests given up on, whose late answers are skipped
        self.process = start(command, env, self.name)
        self._stdin, self._stdout = pipe(self.process.stdin), pipe(self.process.stdout)
        self.stderr = Tail(pipe(self.process.stderr))
        os.set_blocking(self._stdin.fileno(), False)
        self._readable = selectors.DefaultSelector()
        self._readable.register(self._stdout, selectors.EVENT_READ)
        self._writable = selectors.DefaultSelector()
        self._writable.register(self._stdin, selectors.EVENT_WRITE)
        self._buffer = bytearray()
        self._read = 0  # bytes of stdout's lines in all, at most max_bytes
        self._max_bytes = Limits().bytes if max_bytes is None else max_bytes
        self._noise = 0
        self._first_noise = ""
        self._next_id = 0

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def request(
        self, method: str, params: dict, headers: Mapping[str, str] | None = None, wait: float | None = None
    ) -> dict:
        """The result of one request, within `wait` seconds if given (headers are HTTP's); the
        server's notifications and requests meanwhile are handled."""
        self._next_id += 1
        request_id = self._next_id
        self._until = self.deadline if wait is None else min(self.deadline, time.monotonic() + wait)
        try:
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, method)
            message = self._answer_to(request_id, method)
        except TimedOut:
            self._abandoned.add(request_id)
            raise
        finally:
            self._until = self.deadline
        if "error" in message:
            error = message["error"]
            raise Refused.carrying(
                f"{self.name} answered {method} with JSON-RPC error {rpc_error_text(error)}", error
            )
        if not isinstance(message.get("result"), dict):
            raise Garbled(f"{self.name} answered {method} without a result object")
        return message["result"]

    def _answer_to(self, request_id: int, method: str) -> dict:
        while True:
            message = self._message(method)
            answer_id = message.get("id")
            if "method" in message:
                if "id" in message:
                    self._answer(message, method)
            elif answer_id == request_id and not isinstance(answer_id, bool):
                return message
            elif "error" in message and answer_id is None:
                return message  # the server could not read the request: its error says why
            elif answer_id not in self._abandoned or isinstance(answer_id, bool):
                # Requests go one at a time, so any other answer is wrong; waiting for the right
                # one would only run out the clock and lose the reason.
                raise Garbled(
                    f"{self.name} answered {method} with id {one_line(repr(answer_id), 40)}, not {request_id}"
                )

    def notify(self, method: str, headers: Mapping[str, str] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method}, method)

    def stop(self) -> None:
        """Close stdin (and stdout, so a server writing on its way out fails instead of blocking),
        then wait, SIGTERM and SIGKILL the process group, and any descendant that left it, until
        none of it runs. Each wait is cut to what is left of the deadline, but never below
        SHUTDOWN_FLOOR_SECONDS: a server that ran out the clock gets a moment, not two seconds."""
        escaped = descendants_outside_group(self.process.pid)
        for closable in (self._stdin, self._stdout, self._readable, self._writable):
            with contextlib.suppress(OSError):
                closable.close()
        stop_group(self.process, escaped, self.deadline)

    def _answer(self, request: dict, method: str) -> None:
        """Answer a server-to-client request, so a server waiting for it does not hang."""
        if request["method"] == "ping":
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
        else:
            error = {"code": METHOD_NOT_FOUND, "message": f"speclint does not support {request['method']}"}
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": error}
        self._send(reply, method)

    def _send(self, message: dict, method: str) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        while data:
            self._writable.select(self._remaining(method))
            try:
                data = data[os.write(self._stdin.fileno(), data) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._ended(method) from None

    def _message(self, method: str) -> dict:
        """The next JSON-RPC message on stdout, skipping what is not one."""
        while True:
            line = self._line(method)
            try:
                message = loads(line)
            except NotFinite as exc:
                raise Garbled(
                    f"{self.name} answered {method} with JSON the rules cannot read ({exc})"
                ) from None
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
                return message
            if not line.strip():
                continue
            self._noise += len(line) + 1
            self._first_noise = self._first_noise or one_line(line.decode("utf-8", errors="replace"), 80)
            if self._noise > MAX_NOISE_BYTES:
                raise Garbled(
                    f"{self.name} wrote over {MAX_NOISE_BYTES >> 20} MiB to stdout that is not JSON-RPC "
                    f"before answering {method} (it began {self._first_noise!r})"
                )

    def _line(self, method: str) -> bytes:
        """The next line of stdout, waiting no later than the deadline."""
        scanned = 0
        while True:
            remaining = self._remaining(method)
            end = self._buffer.find(b"\n", scanned)
            if end > MAX_LINE_BYTES or (end < 0 and len(self._buffer) > MAX_LINE_BYTES):
                raise Garbled(f"{self.name} wrote a line over {MAX_LINE_BYTES >> 20} MiB answering {method}")
            if end >= 0:
                self._read += end + 1
                if self._read > self._max_bytes:
                    raise Unreadable(
                        f"{self.name} wrote over {human(self._max_bytes)} to stdout in all, answering "
                        f"{method} (--max-bytes)"
                    )
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            scanned = len(self._buffer)
            if self._readable.select(remaining):
                chunk = os.read(self._stdout.fileno(), PIPE_CHUNK_BYTES)
                if not chunk:
                    raise self._ended(method)
                self._buffer += chunk

    def _remaining(self, method: str) -> float:
        remaining = self._until - time.monotonic()
        if remaining <= 0 and self._until < self.deadline:
            raise TimedOut(f"{self.name} did not answer {method} in time")
        if remaining <= 0:
            raise Unreadable(
                f"{self.name} did not answer {method} in time ({self.timeout:g}s for the whole exchange)"
                + self.stderr.said()
            )
        return remaining

    def _ended(self, method: str) -> Ended:
        wait = min(CLOSE_GRACE_SECONDS, max(self.deadline - time.monotonic(), SHUTDOWN_FLOOR_SECONDS))
        try:
            returncode = self.process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            what = "closed its stdout"
        else:
            what = f"exited with {exit_status(returncode)}"
        return Ended(f"{self.name} {what} before answering {method}" + self.stderr.said(wait=0.5), method)

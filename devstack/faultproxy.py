"""A real TCP proxy in front of one upstream host:port whose failure mode a caller switches at any
moment, so clients meet the outages they meet in production: `pass`, `refuse`, `cut`, `stall` or
`mute` (docs/development.md#fault-proxy says what each does). `set(mode, seconds=n)` applies a
mode for n seconds, then goes back to `pass` unless the mode was changed meanwhile; a mode is in
force when `set` returns. The proxy runs an asyncio loop on its own thread; `stats()` counts
connections and bytes; `proxied` sends an Azurite connection string through proxies.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading
from dataclasses import dataclass

from devstack.ports import free_port
from devstack.run import storage_connection

MODES = ("pass", "refuse", "cut", "stall", "mute")
CHUNK = 64 * 1024


@dataclass(frozen=True)
class ProxyStats:
    connections: int  # accepted since start
    open: int  # open now
    reset: int  # torn down by `cut`
    bytes_up: int  # client → upstream
    bytes_down: int  # upstream → client


class _Link:
    """One client connection and, once made, its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter):
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.dead = False

    def reset(self) -> None:
        """Abort both sides with a TCP reset (SO_LINGER 0), so the client sees ECONNRESET."""
        self.dead = True
        for writer in (self.client, self.upstream):
            if writer is None or writer.transport.is_closing():
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


class FaultProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1", port: int | None = None):
        self.upstream = (upstream_host, upstream_port)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._mode = "pass"
        self._generation = 0
        self._links: set[_Link] = set()
        self._counts = {"connections": 0, "reset": 0, "bytes_up": 0, "bytes_down": 0}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faultproxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._changed: asyncio.Condition  # made on the loop, by _start

    # --- the test's side (any thread) ---------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def mode(self) -> str:
        return self._mode

    def set(self, mode: str, seconds: float | None = None) -> None:
        """Switch to `mode` now; with `seconds`, back to `pass` after that long."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        generation = self._call(self._switch(mode))
        if seconds is not None:
            revert = (seconds, self._revert_if_current, generation)
            self._loop.call_soon_threadsafe(self._loop.call_later, *revert)

    def stats(self) -> ProxyStats:
        return self._call(self._stats())

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    # --- the loop's side ----------------------------------------------------------------------

    async def _start(self) -> None:
        self._changed = asyncio.Condition()
        await self._listen()

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)

    def _unlisten(self) -> None:
        if self._server is not None:
            self._server.close()  # existing connections stay open; only the listener goes
            self._server = None

    async def _switch(self, mode: str) -> int:
        self._mode = mode
        self._generation += 1
        if mode in ("refuse", "cut"):
            self._unlisten()
        else:
            await self._listen()
        if mode == "cut":
            for link in list(self._links):
                link.reset()
                self._counts["reset"] += 1
        async with self._changed:
            self._changed.notify_all()
        return self._generation

    def _revert_if_current(self, generation: int) -> None:
        if generation == self._generation:
            self._loop.create_task(self._switch("pass"))

    async def _stats(self) -> ProxyStats:
        return ProxyStats(open=len(self._links), **self._counts)

    async def _shutdown(self) -> None:
        """Cut everything, then give the connections' tasks a moment to end on their own."""
        await self._switch("cut")
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    async def _flowing(self, link: _Link) -> bool:
        """Wait out a stall; False once the link is dead."""
        async with self._changed:
            await self._changed.wait_for(lambda: link.dead or self._mode != "stall")
        return not link.dead

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        self._counts["connections"] += 1
        try:
            if self._mode in ("refuse", "cut"):  # accepted just before the switch: cut it too
                link.reset()
                return
            if not await self._flowing(link):
                return
            try:
                up_reader, link.upstream = await asyncio.open_connection(*self.upstream)
            except OSError:
                link.reset()
                return
            await asyncio.gather(
                self._pump(reader, link.upstream, link, "bytes_up"),
                self._pump(up_reader, writer, link, "bytes_down"),
            )
        finally:
            self._links.discard(link)
            if link.dead:
                link.reset()  # an upstream connection made after the cut goes too
            else:
                for side in (writer, link.upstream):
                    if side is not None:
                        side.close()

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link, counter: str
    ) -> None:
        """Copy one direction until EOF, holding bytes while stalled; an EOF is passed on as a
        half-close, so a client that hangs up after its request still gets it delivered."""
        try:
            while True:
                data = await source.read(CHUNK)
                if not await self._flowing(link):
                    return
                if not data:
                    if sink.can_write_eof():
                        sink.write_eof()
                    return
                if self._mode == "mute" and counter == "bytes_down":
                    continue
                sink.write(data)
                await sink.drain()
                self._counts[counter] += len(data)
        except (ConnectionError, OSError):
            link.reset()


def endpoint_port(connection: str, service: str) -> int:
    """The port of `service` ("Blob", "Table" or "Queue") in a local Azurite connection string."""
    found = re.search(rf"{service}Endpoint=http://127\.0\.0\.1:(\d+)/", connection)
    if found is None:
        raise ValueError(f"no local {service}Endpoint in the connection string")
    return int(found.group(1))


def proxied(
    connection: str,
    blob: FaultProxy | None = None,
    table: FaultProxy | None = None,
    queue: FaultProxy | None = None,
) -> str:
    """The same Azurite connection string with Blob, Table and/or Queue going through these proxies."""
    return storage_connection(
        blob.port if blob else endpoint_port(connection, "Blob"),
        table.port if table else endpoint_port(connection, "Table"),
        queue.port if queue else endpoint_port(connection, "Queue"),
    )

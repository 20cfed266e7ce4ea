"""speclint's MCP client over HTTP: the revision it speaks (2026-07-28's headers and envelope, or the
handshake and its session), pagination, event streams, deadlines and the server's errors, against
the official SDKs' servers (tests/fixtures/speclint_stdio: Python, both eras; TypeScript 1.x, the
handshake era) and a small hand-written one in the test for what an SDK will not do."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devstack.ports import free_port
from devstack.services import start_process
from speclint.findings import __version__
from speclint.protocol.modern import headers as modern_headers
from speclint.transports.streamable_http import HttpWire
from tests.speclint.support import load, run, run_cli
from tests.support import HANG_SECONDS, ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

# ---------------------------------------------------------------- the MCP client


MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "speclint", "version": __version__},
}
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "fake-modern", "version": "2.1"}}
DISCOVERED = {
    "resultType": "complete",
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {}},
    "ttlMs": 300000,
    "cacheScope": "public",
    "_meta": SERVER_INFO,
}
UNSUPPORTED = {"code": -32022, "message": "Unsupported protocol version"}


class FakeMcp:
    """A tiny MCP server: two pages of tools/list, optionally as an event stream, in the handshake
    era with a session (``server/discover`` refused as the TypeScript SDK 1.x refuses any request
    before initialize) or, with ``discover="modern"``, in 2026-07-28 (initialize still answered:
    a client that falls back when it should not is seen doing it). Other ``discover`` values are
    the ways a server answers the probe, in DISCOVER_ANSWERS, or ``keep-alive``: an event stream
    of keep-alive comments that never brings the answer."""

    def __init__(
        self,
        pages: dict,
        sse: bool = False,
        list_error: dict | None = None,
        status: int = 200,
        stall: str = "",
        discover: str = "legacy",
        list_delay: float = 0,
    ):
        self.pages, self.sse, self.list_error, self.status = pages, sse, list_error, status
        # tools/list never completes: "keep-alive", "trickle" (bytes keep coming), "cut", "headers"
        self.stall = stall
        self.discover = discover
        self.list_delay = list_delay  # seconds tools/list waits before its answer
        self.seen: list[tuple[str, str, dict, dict]] = []  # (HTTP method, RPC method, params, headers)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_DELETE(self):
                fake.seen.append(("DELETE", "", {}, dict(self.headers)))
                self._send(200, b"", "application/json")

            def do_POST(self):
                message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.seen.append(("POST", message["method"], message.get("params"), dict(self.headers)))
                fake.answer(self, message)

            def _send(self, status, body, content_type, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/mcp"

    def answer(self, handler, message: dict) -> None:
        if "id" not in message:
            handler._send(202, b"", "application/json")
            return
        if self.status != 200:
            handler._send(self.status, b"<html>oops</html>", "text/html")
            return
        method, rpc_id = message["method"], message["id"]
        if method == "server/discover":
            self.answer_probe(handler, rpc_id)
            return
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
            handler._send(200, json.dumps(body).encode(), "application/json", {"Mcp-Session-Id": "sess-42"})
            return
        if self.stall:
            self.stall_forever(handler, self.stall)
            return
        time.sleep(self.list_delay)
        if self.list_error is not None:
            body = {"jsonrpc": "2.0", "id": rpc_id, "error": self.list_error}
        else:
            page = self.pages[message["params"].get("cursor")]
            if message["params"].get("_meta"):  # the 2026-07-28 envelope: a 2026-07-28 result
                page = {**page, "resultType": "complete", "ttlMs": 60000, "cacheScope": "public"}
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": page}
        if not self.sse:
            handler._send(200, json.dumps(body).encode(), "application/json")
            return
        progress = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
        text = json.dumps(body, indent=1)  # multi-line JSON: several data lines in one event
        stream = ": keep-alive\r\n\r\n" + f"event: message\r\ndata: {json.dumps(progress)}\r\n\r\n"
        stream += "event: message\r\n" + "".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n"
        handler._send(200, stream.encode(), "text/event-stream")

    def answer_probe(self, handler, rpc_id: int) -> None:
        if self.discover == "keep-alive":
            self.stall_forever(handler, "keep-alive")
            return
        status, body, content_type = DISCOVER_ANSWERS[self.discover]
        if body is None:  # silent: the answer never comes (the client gives up first)
            time.sleep(5)
            return
        if isinstance(body, dict):
            body = json.dumps({"jsonrpc": "2.0", "id": rpc_id, **body}).encode()
        handler._send(status, body, content_type)

    @staticmethod
    def stall_forever(handler, stall: str) -> None:
        """Bytes every 0.2 s and never the answer: SSE keep-alive comments, a JSON body one byte
        at a time, or a header one byte at a time. Each read finishes quickly, so only a deadline
        ends the exchange."""
        keep_alive = stall == "keep-alive"
        if stall == "headers":
            with contextlib.suppress(OSError):
                handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(600):
                    handler.wfile.write(b"a")
                    handler.wfile.flush()
                    time.sleep(0.2)
            return
        if stall == "cut":  # a body shorter than its Content-Length, then the connection closes
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            handler.wfile.write(b'{"jsonrpc": "2.0", ')
            handler.close_connection = True
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream" if keep_alive else "application/json")
        handler.send_header("Content-Length", str(10**9))
        handler.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(600):
                handler.wfile.write(b": ping\n\n" if keep_alive else b" ")
                handler.wfile.flush()
                time.sleep(0.2)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


DISCOVER_ANSWERS = {  # status, body (a dict is the JSON-RPC answer's result or error), content type
    "legacy": (
        400,
        {"error": {"code": -32000, "message": "Bad Request: Server not initialized"}},
        "application/json",
    ),
    "not-found": (404, b"Not Found", "text/plain"),
    "server-error": (500, b"<html>oops</html>", "text/html"),
    "html": (200, b"<html>Welcome</html>", "text/html"),
    "not-json": (200, b"{oops", "application/json"),
    "no-versions": (200, {"result": {"capabilities": {}}}, "application/json"),
    "accepted": (202, b"", "application/json"),
    "silent": (200, None, "application/json"),
    "modern": (200, {"result": DISCOVERED}, "application/json"),
    "unsupported-other": (
        400,
        {"error": {**UNSUPPORTED, "data": {"supported": ["2099-01-01"], "requested": MODERN}}},
        "application/json",
    ),
    "unsupported-modern": (  # refuses the very version it names
        400,
        {"error": {**UNSUPPORTED, "data": {"supported": [MODERN], "requested": MODERN}}},
        "application/json",
    ),
}


@pytest.fixture
def fake_mcp() -> Iterator:
    started: list[FakeMcp] = []

    def start(**kwargs) -> FakeMcp:
        server = FakeMcp(**kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def two_pages() -> dict:
    first, second = load("sl001_no_idempotency_key.json")
    return {None: {"tools": [first], "nextCursor": "page-2"}, "page-2": {"tools": [second]}}


@pytest.mark.parametrize("sse", [False, True], ids=["json", "event-stream"])
def test_url_target_follows_next_cursor_and_carries_the_session(fake_mcp, capsys, sse):
    server = fake_mcp(pages=two_pages(), sse=sse)

    code, out, err = run(capsys, server.url, "--format", "json", "--header", "Authorization: Bearer t0k")
    assert (code, err) == (1, "")
    assert [f["tool"] for f in json.loads(out)["findings"]] == ["send_invoice", "append_log_line"]

    calls = [(http, rpc, params) for http, rpc, params, _ in server.seen]
    assert calls == [
        ("POST", "server/discover", {"_meta": ENVELOPE}),  # refused: no session
        ("POST", "initialize", calls[1][2]),
        ("POST", "notifications/initialized", None),
        ("POST", "tools/list", {}),
        ("POST", "tools/list", {"cursor": "page-2"}),
        ("DELETE", "", {}),
    ]
    assert calls[1][2]["protocolVersion"] == "2025-11-25"
    for _, _, _, headers in server.seen:
        assert headers["Authorization"] == "Bearer t0k"
        assert headers["Accept"] == "application/json, text/event-stream"
    initialize = server.seen[1][3]
    assert initialize["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in initialize and "MCP-Protocol-Version" not in initialize
    for _, _, _, headers in server.seen[2:]:
        assert headers["Mcp-Session-Id"] == "sess-42"
        assert headers["MCP-Protocol-Version"] == "2025-11-25"
        assert "Mcp-Method" not in headers
    assert json.loads(out)["server"] == {
        "name": "fake",
        "version": "1",
        "protocol_version": "2025-11-25",
        "ttl_ms": None,
        "cache_scope": None,
    }


@pytest.mark.parametrize("stall", ["keep-alive", "trickle", "headers"])
def test_a_server_that_keeps_sending_but_never_answers_is_given_up_on_at_the_deadline(fake_mcp, stall):
    """Each read is quick, so no read timeout fires: a header sent a byte at a time held speclint
    for as long as the server liked (urllib3 times each read, not the answer)."""
    server = fake_mcp(pages=two_pages(), stall=stall)

    done = run_cli(server.url, "--timeout", "1.5")
    assert done.returncode == 2
    assert "did not finish listing tools in time (1.5s for the whole exchange)" in done.stderr


def many_pages(pages: int, per_page: int) -> dict:
    tool = {"name": "read_record", "inputSchema": {"type": "object"}}
    cursors = [None, *(f"page-{n}" for n in range(1, pages))]
    return {
        cursor: {"tools": [tool] * per_page, **({"nextCursor": cursors[n + 1]} if n + 1 < pages else {})}
        for n, cursor in enumerate(cursors)
    }


def test_pages_stop_being_read_at_the_page_that_passes_the_tool_cap(fake_mcp, capsys):
    server = fake_mcp(pages=many_pages(pages=10, per_page=1000))

    code, out, err = run(capsys, server.url)

    assert (code, out) == (2, "")
    assert "lists more than 5000 tools (--max-tools 5000" in err and err.count("\n") == 1
    assert [rpc for _, rpc, _, _ in server.seen].count("tools/list") == 6


def test_answers_over_the_byte_cap_in_all_are_refused(fake_mcp, capsys):
    server = fake_mcp(pages=many_pages(pages=10, per_page=100))  # about 6 KiB a page

    code, out, err = run(capsys, server.url, "--max-bytes", "16K")

    assert (code, out) == (2, "")
    assert f"the answers from {server.url} are over 16 KiB in all, at tools/list (--max-bytes)" in err
    assert [rpc for _, rpc, _, _ in server.seen].count("tools/list") < 10


def test_an_answer_cut_short_exits_2_with_one_line(fake_mcp):
    server = fake_mcp(pages=two_pages(), stall="cut")

    done = run_cli(server.url, "--timeout", "5")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "tools/list answer from" in done.stderr and "broke off" in done.stderr


def test_json_rpc_error_from_the_server_exits_2(fake_mcp, capsys):
    server = fake_mcp(pages={}, list_error={"code": -32601, "message": "Method not found"})
    code, out, err = run(capsys, server.url)
    assert (code, out) == (2, "")
    assert "tools/list" in err and "-32601" in err and err.count("\n") == 1


def test_http_error_from_the_server_exits_2(fake_mcp, capsys):
    server = fake_mcp(pages={}, status=500)
    code, out, err = run(capsys, server.url)
    assert (code, out) == (2, "")
    assert "HTTP 500" in err and err.count("\n") == 1


# ---------------------------------------------------------------- which revision: the probe and the fallback


@pytest.mark.parametrize("sse", [False, True], ids=["json", "event-stream"])
def test_a_2026_server_is_spoken_to_without_a_session_and_every_request_says_its_revision(
    fake_mcp, capsys, sse
):
    server = fake_mcp(pages=two_pages(), sse=sse, discover="modern")

    code, out, err = run(capsys, server.url, "--format", "json")

    assert (code, err) == (1, "")
    report = json.loads(out)
    assert [f["tool"] for f in report["findings"]] == ["send_invoice", "append_log_line"]
    assert report["server"] == {
        "name": "fake-modern",
        "version": "2.1",
        "protocol_version": MODERN,
        "ttl_ms": 60000,  # the pages' own, shorter than discover's
        "cache_scope": "public",
    }
    calls = [(http, rpc, params) for http, rpc, params, _ in server.seen]
    assert calls == [  # no initialize, no session to delete
        ("POST", "server/discover", {"_meta": ENVELOPE}),
        ("POST", "tools/list", {"_meta": ENVELOPE}),
        ("POST", "tools/list", {"cursor": "page-2", "_meta": ENVELOPE}),
    ]
    for _, rpc, _, headers in server.seen:
        assert headers["MCP-Protocol-Version"] == MODERN
        assert headers["Mcp-Method"] == rpc
        assert "Mcp-Name" not in headers and "Mcp-Session-Id" not in headers


def test_the_name_of_a_named_operation_is_mirrored_in_mcp_name_plain_or_base64():
    assert modern_headers("tools/list", {"cursor": "x"}) == {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    named = {
        ("tools/call", "name", "get_weather"): "get_weather",
        ("resources/read", "uri", "file:///a b.txt"): "file:///a b.txt",
        ("prompts/get", "name", "Hello, 世界"): "=?base64?SGVsbG8sIOS4lueVjA==?=",
        ("tools/call", "name", " padded "): "=?base64?IHBhZGRlZCA=?=",
        ("tools/call", "name", "line1\nline2"): "=?base64?bGluZTEKbGluZTI=?=",
        ("tools/call", "name", "=?base64?literal?="): "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
    }
    for (method, key, value), sent in named.items():
        assert modern_headers(method, {key: value})["Mcp-Name"] == sent


@pytest.mark.parametrize(
    "discover", ["legacy", "not-found", "server-error", "html", "not-json", "no-versions", "accepted"]
)
def test_a_probe_refused_or_garbled_falls_back_to_initialize(fake_mcp, capsys, discover):
    server = fake_mcp(pages=two_pages(), discover=discover)

    code, out, err = run(capsys, server.url, "--format", "json")

    assert (code, err) == (1, "")
    assert json.loads(out)["server"]["protocol_version"] == "2025-11-25"
    assert [rpc for _, rpc, _, _ in server.seen][:3] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
    ]


@pytest.mark.parametrize("discover", ["silent", "keep-alive"])
def test_a_silent_probe_falls_back_once_its_share_of_the_deadline_has_passed(fake_mcp, discover):
    server = fake_mcp(pages=two_pages(), discover=discover)
    started = time.monotonic()

    done = run_cli(server.url, "--timeout", "6", "--format", "json")

    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started >= 2  # the probe's third of the 6 s
    assert json.loads(done.stdout)["server"]["protocol_version"] == "2025-11-25"
    assert [rpc for _, rpc, _, _ in server.seen][:2] == ["server/discover", "initialize"]


def test_a_deadline_timer_that_fires_as_its_request_ends_never_cuts_the_next_request(fake_mcp):
    """On a busy machine a request's own read timeout and its deadline timer can go off together:
    the timer, already running, must not shut the connection of the request that follows."""
    server = fake_mcp(pages=two_pages(), list_delay=1.0)
    wire = HttpWire(server.url, {}, timeout=20)
    wire.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, {})
    late = wire._watch_timer
    answers: list[object] = []

    def list_tools() -> None:
        try:
            answers.append(wire.request("tools/list", {}, {}))
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            answers.append(exc)

    listing = threading.Thread(target=list_tools)
    listing.start()
    time.sleep(0.4)  # tools/list is on the wire, waiting for its answer
    late.function(*late.args, **late.kwargs)  # the first request's timer going off only now
    listing.join(10)
    wire.close()

    assert [type(a) for a in answers] == [dict], answers
    assert answers[0]["tools"][0]["name"]


@pytest.mark.parametrize(
    ("failure", "complaint"),
    [
        ({"list_error": {"code": -32603, "message": "database down"}}, "JSON-RPC error -32603 database down"),
        (
            {"list_error": {**UNSUPPORTED, "data": {"supported": ["2025-06-18"], "requested": MODERN}}},
            "-32022",
        ),
        ({"stall": "cut"}, "broke off"),
    ],
    ids=["rpc-error", "unsupported-after-all", "cut"],
)
def test_a_server_that_claims_2026_and_then_fails_is_reported_not_retried_another_way(
    fake_mcp, capsys, failure, complaint
):
    server = fake_mcp(pages=two_pages(), discover="modern", **failure)

    code, out, err = run(capsys, server.url, "--timeout", "5")

    assert (code, out) == (2, "")
    assert "tools/list" in err and complaint in err and err.count("\n") == 1
    assert [rpc for _, rpc, _, _ in server.seen] == ["server/discover", "tools/list"]


def test_a_server_of_other_revisions_only_is_told_so_without_a_handshake(fake_mcp, capsys):
    server = fake_mcp(pages=two_pages(), discover="unsupported-other")

    code, out, err = run(capsys, server.url)

    assert (code, out) == (2, "")
    assert "speaks only MCP 2099-01-01" in err
    assert [rpc for _, rpc, _, _ in server.seen] == ["server/discover"]


def test_a_server_that_refuses_2026_07_28_while_naming_it_is_probed_twice_and_reported(fake_mcp, capsys):
    server = fake_mcp(pages=two_pages(), discover="unsupported-modern")

    code, out, err = run(capsys, server.url)

    assert (code, out) == (2, "")
    assert "server/discover failed" in err and "-32022 Unsupported protocol version" in err
    assert [rpc for _, rpc, _, _ in server.seen] == ["server/discover", "server/discover"]


# ---------------------------------------------------------------- the official SDKs' servers


def received(log) -> list[tuple[str, dict]]:
    """Each request a fixture server logged: its method and its MCP headers."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return [
        (entry["message"].get("method"), {k: v for k, v in entry["headers"].items() if k.startswith("mcp-")})
        for entry in entries
    ]


@contextlib.contextmanager
def serving(tmp_path, *command: str) -> Iterator[tuple[str, object]]:
    """A fixture server started with `--http PORT --log PATH`: its MCP URL and its log."""
    port, log = free_port(), tmp_path / "received.jsonl"
    proc = start_process([*command, "--http", str(port), "--log", str(log)], port, tmp_path / "server.out")
    try:
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_SECONDS)


def test_a_python_sdk_server_is_listed_in_2026_07_28_without_initialize(tmp_path):
    server = [sys.executable, str(ROOT / "tests/fixtures/speclint_stdio/sdk_server.py"), "--tools", "5"]
    with serving(tmp_path, *server, "--page-size", "2") as (url, log):
        done = run_cli(url, "--format", "json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tools_checked"] == 5
    assert report["server"] == {
        "name": "speclint-sdk-fixture",
        "version": "1.0.0",
        "protocol_version": MODERN,
        "ttl_ms": 0,
        "cache_scope": "private",
    }
    # The SDK refuses a request whose headers disagree with its body (-32020): these passed.
    assert received(log) == [
        ("server/discover", {"mcp-protocol-version": MODERN, "mcp-method": "server/discover"}),
        *[("tools/list", {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})] * 3,
    ]


@pytest.mark.skipif(not shutil.which("node"), reason="needs Node")
def test_a_typescript_sdk_1_server_falls_back_to_initialize_and_its_session(tmp_path):
    with serving(tmp_path, "node", str(ROOT / "tests/fixtures/speclint_stdio/sdk_server.mjs")) as (url, log):
        done = run_cli(url, "--format", "json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tools_checked"] == 2
    assert report["server"]["protocol_version"] == "2025-11-25"
    assert report["server"]["name"] == "speclint-stdio-fixture-ts"
    requests = received(log)
    assert [method for method, _ in requests] == [
        "server/discover",  # 400: not initialized
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    session = requests[1:]
    assert "mcp-session-id" not in session[0][1]
    assert {headers["mcp-protocol-version"] for _, headers in session[1:]} == {"2025-11-25"}
    assert len({headers["mcp-session-id"] for _, headers in session[1:]}) == 1

"""speclint's MCP client over HTTP: sessions, pagination, event streams, deadlines and the server's
errors, against a small MCP server in the test."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.speclint_support import load, run, run_cli

# ---------------------------------------------------------------- the MCP client


class FakeMcp:
    """A tiny MCP server: sessions, two pages of tools/list, optionally as an event stream."""

    def __init__(
        self,
        pages: dict,
        sse: bool = False,
        list_error: dict | None = None,
        status: int = 200,
        stall: str = "",
    ):
        self.pages, self.sse, self.list_error, self.status = pages, sse, list_error, status
        self.stall = stall  # tools/list never completes: "keep-alive", "trickle" (bytes keep coming), "cut"
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
            self.stall_forever(handler)
            return
        if self.list_error is not None:
            body = {"jsonrpc": "2.0", "id": rpc_id, "error": self.list_error}
        else:
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": self.pages[message["params"].get("cursor")]}
        if not self.sse:
            handler._send(200, json.dumps(body).encode(), "application/json")
            return
        progress = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
        text = json.dumps(body, indent=1)  # multi-line JSON: several data lines in one event
        stream = ": keep-alive\r\n\r\n" + f"event: message\r\ndata: {json.dumps(progress)}\r\n\r\n"
        stream += "event: message\r\n" + "".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n"
        handler._send(200, stream.encode(), "text/event-stream")

    def stall_forever(self, handler) -> None:
        """Bytes every 0.2 s and never the answer: SSE keep-alive comments, or a JSON body one
        byte at a time. Each read finishes quickly, so only a deadline ends the exchange."""
        keep_alive = self.stall == "keep-alive"
        if self.stall == "cut":  # a body shorter than its Content-Length, then the connection closes
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
        ("POST", "initialize", calls[0][2]),
        ("POST", "notifications/initialized", None),
        ("POST", "tools/list", {}),
        ("POST", "tools/list", {"cursor": "page-2"}),
        ("DELETE", "", {}),
    ]
    assert calls[0][2]["protocolVersion"] == "2025-06-18"
    first_headers = server.seen[0][3]
    assert first_headers["Accept"] == "application/json, text/event-stream"
    assert first_headers["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in first_headers
    for _, _, _, headers in server.seen:
        assert headers["Authorization"] == "Bearer t0k"
    for _, _, _, headers in server.seen[1:]:
        assert headers["Mcp-Session-Id"] == "sess-42"
        assert headers["MCP-Protocol-Version"] == "2025-06-18"


@pytest.mark.parametrize("stall", ["keep-alive", "trickle"])
def test_a_server_that_keeps_sending_but_never_answers_is_given_up_on_at_the_deadline(fake_mcp, stall):
    server = fake_mcp(pages=two_pages(), stall=stall)

    done = run_cli(server.url, "--timeout", "1.5")
    assert done.returncode == 2
    assert "did not finish listing tools in time (1.5s for the whole exchange)" in done.stderr


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

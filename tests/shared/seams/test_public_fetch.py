"""shared.seams.public_fetch: a document a stranger named is fetched from public addresses only,
within one deadline for the whole fetch however slowly the server answers, within a size cap, and
never more than MAX_CONCURRENT at once."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from shared.seams.public_fetch import MAX_CONCURRENT, NOT_PUBLIC, FetchFailed, PublicFetcher, is_public

pytestmark = pytest.mark.services  # serves sockets on loopback


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:4700::6810:84e5", True),
        ("64:ff9b::5db8:d70e", True),  # NAT64 of 93.184.215.14
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("168.63.129.16", False),  # Azure's platform address
        ("fec0::1", False),  # deprecated site-local
        ("100.64.0.1", False),  # shared address space (CGNAT)
        ("192.0.0.8", False),  # IETF protocol assignments
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("::ffff:0:7f00:1", False),  # SIIT
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b:1::1", False),  # NAT64's local-use prefix
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
        ("224.0.0.1", False),
        ("not an address", False),
    ],
)
def test_only_public_addresses_are_public(address, public):
    assert is_public(address) is public


class Server:
    """A TCP server on loopback that answers each connection with `answer(conn)` and counts them."""

    def __init__(self, answer):
        self.accepted = 0
        self.sent_all: list[bool] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/doc"
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.recv(4096)
            self.answer(conn)
            self.sent_all.append(True)
        except OSError:
            self.sent_all.append(False)
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()


def dribble(head: bytes, body: bytes, pause: float):
    """Send `head`, then `body` one byte at a time, `pause` seconds apart."""

    def answer(conn: socket.socket) -> None:
        conn.sendall(head)
        for byte in body:
            time.sleep(pause)
            conn.sendall(bytes([byte]))

    return answer


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


def test_on_azure_a_loopback_host_is_refused_before_any_connection():
    server = Server(lambda conn: conn.sendall(OK + b"Content-Length: 2\r\n\r\n{}"))
    try:
        fetcher = PublicFetcher(local=False, timeout=2, max_bytes=1024)
        with pytest.raises(FetchFailed, match="HTTPS"):
            fetcher.get(server.url, "application/json")
        with pytest.raises(FetchFailed, match=NOT_PUBLIC):
            fetcher.get(server.url.replace("http://", "https://"), "application/json")
        assert server.accepted == 0, "no connection was made, so no port's state shows"
    finally:
        server.close()


def test_a_name_rebound_to_loopback_after_the_check_is_never_connected_to(monkeypatch):
    """A rebinding name server answers the check with a public address and the next query with
    127.0.0.1: the store resolves once and connects to the address it checked."""
    server = Server(lambda conn: conn.sendall(OK + b"Content-Length: 2\r\n\r\n{}"))
    port = int(server.url.split(":")[2].split("/")[0])
    answers = iter(["93.184.215.14"] + ["127.0.0.1"] * 10)
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        if host == "rebind.attacker.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        with pytest.raises(FetchFailed) as refused:
            PublicFetcher(local=False, timeout=1, max_bytes=1024).get(
                f"https://rebind.attacker.example:{port}/doc", "application/json"
            )
        assert server.accepted == 0, "the loopback listener was never reached"
        assert NOT_PUBLIC not in str(refused.value)
    finally:
        server.close()


def test_a_body_dribbled_a_byte_at_a_time_is_cut_off_at_the_deadline():
    body = b'{"keys": []}' + b" " * 200
    server = Server(dribble(OK + f"Content-Length: {len(body)}\r\n\r\n".encode(), body, 0.05))
    try:
        with pytest.raises(FetchFailed):
            PublicFetcher(local=True, timeout=1, max_bytes=4096).get(server.url, "application/json")
        _wait_for(lambda: server.sent_all)
        assert server.sent_all == [False], "the store hung up before the server had sent it all"
    finally:
        server.close()


def test_headers_dribbled_a_byte_at_a_time_are_cut_off_at_the_deadline():
    head = OK + b"X-Pad: " + b"a" * 200 + b"\r\nContent-Length: 2\r\n\r\n"
    server = Server(dribble(b"", head + b"{}", 0.05))
    try:
        with pytest.raises(FetchFailed):
            PublicFetcher(local=True, timeout=1, max_bytes=4096).get(server.url, "application/json")
        _wait_for(lambda: server.sent_all)
        assert server.sent_all == [False]
    finally:
        server.close()


@pytest.mark.parametrize(
    "head",
    [
        OK + "Content-Length: \u00b2\r\n\r\n{}".encode(),
        OK + b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n{}",
        OK + b"Content-Length: 999999\r\n\r\n{}",
    ],
    ids=["superscript-two", "five-thousand-digits", "too-large"],
)
def test_a_hostile_content_length_is_refused_never_raised(head):
    server = Server(lambda conn: conn.sendall(head))
    try:
        with pytest.raises(FetchFailed):
            PublicFetcher(local=True, timeout=2, max_bytes=4096).get(server.url, "application/json")
    finally:
        server.close()


def test_fetches_past_the_concurrency_cap_are_refused_not_queued():
    release = threading.Event()
    server = Server(lambda conn: (release.wait(5), conn.sendall(OK + b"Content-Length: 2\r\n\r\n{}")))
    fetcher = PublicFetcher(local=True, timeout=5, max_bytes=4096)
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(_outcome(fetcher, server.url)))
        for _ in range(MAX_CONCURRENT)
    ]
    try:
        for thread in threads:
            thread.start()
        _wait_for(lambda: server.accepted == MAX_CONCURRENT)
        with pytest.raises(FetchFailed, match="too many"):
            fetcher.get(server.url, "application/json")
        release.set()
        for thread in threads:
            thread.join(10)
        assert results == [200] * MAX_CONCURRENT
        assert fetcher.get(server.url, "application/json").status == 200, "the slots came back"
    finally:
        release.set()
        server.close()


def _outcome(fetcher: PublicFetcher, url: str) -> object:
    try:
        return fetcher.get(url, "application/json").status
    except FetchFailed as exc:
        return str(exc)


def _wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)

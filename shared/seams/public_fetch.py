"""Fetching a document a caller named (an agent's key directory, a platform's profile) or posting
to one (a platform's webhook): the one kind of outbound call whose address a stranger chooses, so
it is held tight. On Azure only HTTPS, only public addresses
(every address the name resolves to, then the socket actually connected), no proxy from the
environment, no redirect. Everywhere: a hard deadline for the whole fetch, headers and body alike,
enforced by shutting its sockets down; a size cap; at most MAX_CONCURRENT fetches at once."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import threading
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

MAX_CONCURRENT = 8  # fetches in flight in one instance; more are refused, never queued
NOT_PUBLIC = "its host is not a public address"
_DIGITS = re.compile(r"[0-9]{1,9}")
# Addresses whose embedded IPv4 address is the one reached (NAT64, 6to4), or that no public host
# has (IPv4-compatible, SIIT, NAT64's local-use prefix, IETF protocol assignments): the ipaddress
# module of older Pythons calls some of them global.
_EMBEDDING = (ipaddress.IPv6Network("64:ff9b::/96"),)
_NEVER = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",
        "::ffff:0:0:0/96",
        "64:ff9b:1::/48",
        "2001::/32",
        "fec0::/10",  # deprecated site-local
        "192.0.0.0/24",
        "100.64.0.0/10",
        "168.63.129.16/32",  # Azure's platform address (host DNS, health probes, WireServer)
    )
)


class FetchFailed(Exception):
    """The document could not be fetched; the message says why, in words safe to show a caller."""


class FetchBusy(FetchFailed):
    """This instance is fetching as many documents as it may at once: nothing was tried, and a
    moment later the same fetch may well succeed (so it is no answer to remember)."""


@dataclass(frozen=True)
class Fetched:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes


def is_public(address: str) -> bool:
    """Whether an address is on the public internet: not private, loopback, link-local, shared
    (CGNAT), multicast or reserved, nor an IPv6 form that embeds or stands for one."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public(str(ip.ipv4_mapped))
        if ip.sixtofour is not None:
            return is_public(str(ip.sixtofour))
        if any(ip in network for network in _EMBEDDING):
            return is_public(str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    if any(ip in network for network in _NEVER if network.version == ip.version):
        return False
    return ip.is_global and not ip.is_multicast


class PublicFetcher:
    def __init__(self, *, local: bool, timeout: float, max_bytes: int):
        """`local`: not hosted on Azure, so plain HTTP and any address are allowed."""
        self._local = local
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._session = requests.Session()
        self._session.trust_env = False  # no proxy from the environment: the peer checked is the host
        adapter = _Adapter(max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)

    def get(self, url: str, accept: str) -> Fetched:
        """GET `url` within the deadline and the size cap. Raises FetchFailed."""
        return self._guarded("GET", url, {"Accept": accept}, None)

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> Fetched:
        """POST `body` to `url` with `headers`, under the same guards as `get`; the answer's status
        and headers, its body left unread (a receiver may say anything at any length after a 2xx).
        Raises FetchFailed."""
        return self._guarded("POST", url, headers, body)

    def _guarded(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Fetched:
        if not (url.startswith("https://") or (self._local and url.startswith("http://"))):
            raise FetchFailed("it must be served over HTTPS")
        if not self._slots.acquire(blocking=False):
            raise FetchBusy("too many documents are being fetched at once; try again shortly")
        sockets: list[socket.socket] = []
        _opened.sockets, _opened.public_only = sockets, not self._local
        late = threading.Event()
        watchdog = threading.Timer(self._timeout, _shut, (sockets, late))
        watchdog.start()
        try:
            fetched = self._send(method, url, headers, body)
            if late.is_set():  # what arrived before the sockets were shut is cut short
                raise FetchFailed(f"it took longer than {self._timeout:g} seconds")
            return fetched
        except FetchFailed:
            raise
        except requests.RequestException as exc:
            raise FetchFailed(NOT_PUBLIC if NOT_PUBLIC in str(exc) else "it could not be fetched") from None
        except Exception:  # noqa: BLE001 - whatever a hostile server's answer makes a library raise
            raise FetchFailed("it could not be read") from None
        finally:
            watchdog.cancel()
            _opened.sockets, _opened.public_only = None, True
            _shut(sockets)
            self._slots.release()

    def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Fetched:
        with self._session.request(
            method,
            url,
            data=body,
            headers={**headers, "Connection": "close"},
            timeout=self._timeout,
            allow_redirects=False,
            stream=True,
        ) as response:
            headers = {name.lower(): value for name, value in response.headers.items()}
            if method == "POST":
                return Fetched(response.status_code, headers, b"")
            declared = headers.get("content-length", "")
            if _DIGITS.fullmatch(declared) is None and declared:
                raise FetchFailed("its Content-Length is not a number")
            if declared and int(declared) > self._max_bytes:
                raise FetchFailed(f"it is larger than {self._max_bytes} bytes")
            read = bytearray()
            for chunk in response.iter_content(1024):
                read += chunk
                if len(read) > self._max_bytes:
                    raise FetchFailed(f"it is larger than {self._max_bytes} bytes")
            return Fetched(response.status_code, headers, bytes(read))


def whole_number(text: str) -> int | None:
    """A header's non-negative integer (ASCII digits, at most nine), else None."""
    return int(text) if _DIGITS.fullmatch(text) else None


# The fetch this thread runs: its sockets (for its watchdog) and whether it is public-only (the
# default, should a connection ever be opened outside `get`).
_opened = threading.local()


def _shut(sockets: list[socket.socket], late: threading.Event | None = None) -> None:
    """Shut every socket of a fetch down: a read blocked on a server dribbling bytes returns.
    `late` is set first when the deadline is what shut them."""
    if late is not None:
        late.set()
    for sock in list(sockets):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _connected(conn: HTTPConnection, connect) -> socket.socket:
    """The connection's socket, registered with its fetch's watchdog. For a public-only fetch the
    host is resolved once, every address it gives must be public, and the socket connects to
    those very addresses (never resolving again, so DNS cannot rebind the name to an internal
    one between the check and the connection); TLS still checks the host's name."""
    if not getattr(_opened, "public_only", True):
        return _registered(connect())
    try:
        infos = socket.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
    except OSError:
        raise OSError("its host does not resolve") from None
    if not infos or not all(is_public(str(info[4][0])) for info in infos):
        raise OSError(f"{conn.host}: {NOT_PUBLIC}")
    timeout = conn.timeout if isinstance(conn.timeout, (int, float)) else None
    for family, kind, proto, _, address in infos[:2]:
        sock = _registered(socket.socket(family, kind, proto))
        try:
            sock.settimeout(timeout)
            sock.connect(address)
        except OSError:
            sock.close()
            continue
        return sock
    raise OSError("it could not be connected to")


def _registered(sock: socket.socket) -> socket.socket:
    sockets = getattr(_opened, "sockets", None)
    if sockets is not None:
        sockets.append(sock)
    return sock


class _HTTP(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _connected(self, super()._new_conn)


class _HTTPS(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _connected(self, super()._new_conn)


class _Pool(HTTPConnectionPool):
    ConnectionCls = _HTTP


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPS


class _Adapter(HTTPAdapter):
    """Every connection through `_connected`, which reads the fetch's rules from `_opened`."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _HTTPSPool}

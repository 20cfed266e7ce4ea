"""The soak's buyers: agents that purchase over MCP and plain HTTP, on either host, from their own
loopback addresses, and retry the way a careful agent does.

A keyed order is retried until it is answered for good: on 409, 503 and 5xx after the Retry-After
it was given (up to a cap), on a lost connection after a short pause, and once it has its 200 it is
sometimes asked again, which must replay the same bytes. An order without a key is sent once:
retrying it would be another purchase. Every answer goes into the journal, normalised so that an
MCP tool error and an HTTP error compare alike.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import requests

from devstack.loopback import client_from

RETRY_AFTER_CAP = 3.0  # seconds: an agent waits what it is told, but no longer than this
TIMEOUT = (3.0, 20.0)  # connect, read
RETRIED = (None, 409, 500, 502, 503)  # None: no answer at all (connection refused, reset, timeout)
BUNDLES = ("agent-starter-kit", "mcp-field-guide")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@dataclass(frozen=True)
class Order:
    """One purchase: with a key, retried until answered; without, sent once."""

    email: str
    address: str  # the loopback address the agent calls from: the store's client IP
    key: str | None
    name: str = ""
    bundle: str = BUNDLES[0]

    def arguments(self) -> dict:
        args = {"email": self.email, "bundle_id": self.bundle}
        if self.name:
            args["name"] = self.name
        return args


@dataclass(frozen=True)
class Answer:
    order: Order
    phase: str  # "load" or "settle"
    channel: str  # "mcp" or "http"
    host: int
    at: float  # when the answer came, in seconds since the load started
    took: float  # how long the request was out
    status: int | None  # HTTP status (an MCP tool error: the status its error maps to); 0 unreadable
    code: str | None = None  # error.code
    retry_after: float | None = None  # Retry-After (HTTP) or error.retry_after_seconds (MCP)
    receipt: bytes | None = None  # a 200's receipt, byte for byte
    replayed: bool = False
    failure: str | None = None  # why there was no answer


class Reply(TypedDict, total=False):
    """What one request learned, as the fields of its Answer (status always among them)."""

    status: int | None
    code: str | None
    retry_after: float | None
    receipt: bytes | None
    replayed: bool
    failure: str | None


@dataclass
class Journal:
    """Every order and answer of the run, shared by the agents' threads."""

    started: float  # time.monotonic() when the load began
    orders: list[Order] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def order(self, order: Order) -> Order:
        with self._lock:
            self.orders.append(order)
        return order

    def record(self, answer: Answer) -> Answer:
        with self._lock:
            self.answers.append(answer)
        return answer

    def now(self) -> float:
        return time.monotonic() - self.started


class Pacer:
    """At most `per_second` new orders a second across all agents, so the run's demand (and when
    the cost ceiling is reached) does not depend on how fast the machine is."""

    def __init__(self, per_second: float):
        self._gap = 1.0 / per_second
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def wait(self, deadline: float) -> bool:
        with self._lock:
            slot = max(time.monotonic(), self._next)
            self._next = slot + self._gap
        if slot >= deadline:
            return False
        time.sleep(max(0.0, slot - time.monotonic()))
        return True


def tool_status(receipt: dict) -> int:
    """The HTTP status an MCP tool error stands for, from its failure receipt."""
    code = (receipt.get("error") or {}).get("code", "")  # no code: none of those below
    if receipt.get("status") == "failed":
        return {"internal_error": 500, "upstream_rejected": 502, "upstream_error": 502}.get(code, 503)
    return {"idempotency_key_in_use": 409, "rate_limited": 429, "cost_ceiling_reached": 429}.get(code, 422)


class Caller:
    """Sends one order's request from the order's own address, over a channel, to a host."""

    def __init__(self, hosts: Sequence[str], journal: Journal, rng: random.Random):
        self._hosts = hosts
        self._journal = journal
        self._rng = rng
        self._sessions: dict[str, requests.Session] = {}

    def call(self, order: Order, phase: str) -> Answer:
        channel = self._rng.choice(("mcp", "http"))
        host = self._rng.randrange(len(self._hosts))
        send = self._mcp if channel == "mcp" else self._http
        sent = self._journal.now()
        try:
            answer = send(order, self._hosts[host])
        except requests.RequestException as exc:
            answer = {"status": None, "failure": type(exc).__name__}
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            answer = {"status": 0, "code": f"unreadable answer ({type(exc).__name__})"}
        now = self._journal.now()
        return self._journal.record(
            Answer(at=now, took=now - sent, order=order, phase=phase, channel=channel, host=host, **answer)
        )

    def _session(self, address: str) -> requests.Session:
        if address not in self._sessions:
            self._sessions[address] = client_from(address)
        return self._sessions[address]

    def _headers(self) -> dict[str, str]:
        """A forged X-Forwarded-For entry: the store must key on the address it saw, not this."""
        return {"X-Forwarded-For": f"203.0.113.{self._rng.randrange(1, 255)}"}

    def _email(self, order: Order) -> str:
        """Now and then the same address in other words, which must still replay."""
        return f"  {order.email.upper()}" if self._rng.random() < 0.15 else order.email

    def _mcp(self, order: Order, url: str) -> Reply:
        args = {**order.arguments(), "email": self._email(order)}
        if order.key:
            args["idempotency_key"] = order.key
        message = {
            "jsonrpc": "2.0",
            "id": self._rng.randrange(1, 10**9),
            "method": "tools/call",
            "params": {"name": "purchase_free_bundle", "arguments": args},
        }
        response = self._session(order.address).post(
            f"{url}/api/a2a/mcp", json=message, headers={**MCP_HEADERS, **self._headers()}, timeout=TIMEOUT
        )
        if response.status_code != 200:
            return _http_error(response)
        reply = json.loads(response.content)
        if "error" in reply:
            return {"status": 400, "code": f"jsonrpc {reply['error'].get('code')}"}
        result = reply["result"]
        text = result["content"][0]["text"]
        if not result["isError"]:
            replayed = bool((result.get("_meta") or {}).get("storefront/replayed"))
            return {"status": 200, "receipt": text.encode(), "replayed": replayed}
        receipt = json.loads(text)
        error = receipt.get("error") or {}
        return {
            "status": tool_status(receipt),
            "code": error.get("code"),
            "retry_after": error.get("retry_after_seconds"),
        }

    def _http(self, order: Order, url: str) -> Reply:
        body, headers = {**order.arguments(), "email": self._email(order)}, self._headers()
        if order.key:
            where = self._rng.choice(("body", "header", "both"))
            if where != "header":
                body["idempotency_key"] = order.key
            if where != "body":
                headers["Idempotency-Key"] = order.key
        response = self._session(order.address).post(
            f"{url}/api/a2a/purchase", json=body, headers=headers, timeout=TIMEOUT
        )
        if response.status_code == 200:
            return {
                "status": 200,
                "receipt": response.content,
                "replayed": response.headers.get("Idempotent-Replayed") == "true",
            }
        return _http_error(response)


def _http_error(response: requests.Response) -> Reply:
    try:
        code = (json.loads(response.content).get("error") or {}).get("code")
    except (ValueError, AttributeError):
        code = None
    retry_after = response.headers.get("Retry-After")
    return {
        "status": response.status_code,
        "code": code,
        "retry_after": float(retry_after) if retry_after and retry_after.isdigit() else None,
    }


class Agent:
    """One buyer thread: new orders while the load lasts, each pursued until answered."""

    def __init__(
        self,
        index: int,
        seed: int,
        caller_for: Callable[[random.Random], Caller],
        journal: Journal,
        make_order: Callable[[random.Random, int], Order],
    ):
        self.index = index
        self._rng = random.Random(f"{seed}/agent/{index}")
        self._caller = caller_for(self._rng)
        self._journal = journal
        self._make_order = make_order

    def run(self, pacer: Pacer, deadline: float) -> None:
        n = 0
        while pacer.wait(deadline):
            n += 1
            order = self._journal.order(self._make_order(self._rng, n))
            if order.key is None:
                self._caller.call(order, "load")
                continue
            answer = pursue(self._caller, order, deadline, "load", self._rng)
            if answer is not None and answer.status == 200:
                for _ in range(self._rng.choice((0, 0, 1, 2))):
                    self._caller.call(order, "load")


def pursue(caller: Caller, order: Order, deadline: float, phase: str, rng: random.Random) -> Answer | None:
    """Ask again until the key is answered for good (a 200, or a refusal not worth retrying) or the
    deadline passes; the last answer."""
    last = None
    while time.monotonic() < deadline:
        last = caller.call(order, phase)
        if last.status not in RETRIED:
            return last
        time.sleep(pause(last, rng))
    return last


def pause(answer: Answer, rng: random.Random) -> float:
    if answer.retry_after is not None:
        return min(float(answer.retry_after), RETRY_AFTER_CAP)
    return rng.uniform(0.2, 1.0)

"""UCP's Idempotency-Key rule over real Azure Table storage (the session's Azurite, through a
fault proxy): the first answer replayed byte for byte, another body a 409, a key still being
answered a 409 with Retry-After, a 5xx not kept, and nothing run when the keys cannot be read."""

from __future__ import annotations

import json
import uuid

import pytest

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.hashing import Hasher
from shared.config.sealing import Sealer
from shared.protocols.http import Answer, json_answer
from shared.protocols.ucp.replay import KEEP_SECONDS, Replays
from shared.seams.checkout_store import PURPOSE, CheckoutStore
from shared.seams.storage import table_client
from tests.support import StoppedClock


@pytest.fixture
def proxy(azurite):
    with FaultProxy(endpoint_port(azurite, "Table")) as proxy:
        yield proxy


@pytest.fixture
def clock() -> StoppedClock:
    return StoppedClock()


@pytest.fixture
def replays(azurite, proxy, clock) -> Replays:
    table = table_client(proxied(azurite, table=proxy), f"ucp{uuid.uuid4().hex[:10]}", 2)
    store = CheckoutStore(table, Sealer("unit-test-secret", PURPOSE))
    return Replays(store, Hasher("unit-test-secret"), lease_seconds=60, clock=clock)


class Operation:
    """What the replay layer runs: counts its runs, answers with a fresh id each time."""

    def __init__(self, status: int = 200):
        self.runs = 0
        self.status = status

    def __call__(self) -> Answer:
        self.runs += 1
        return json_answer(self.status, {"id": uuid.uuid4().hex, "email": "ada@example.org"})


def test_the_same_key_and_body_get_the_first_answers_bytes_without_running_again(replays):
    operation = Operation()

    first = replays.run("platform\x00create\x00", "k-1", b'{"a":1}', operation)
    again = replays.run("platform\x00create\x00", "k-1", b'{"a":1}', operation)

    assert operation.runs == 1
    assert (again.status, again.body) == (first.status, first.body)
    assert again.headers["Idempotent-Replayed"] == "true"


def test_another_body_under_the_key_is_a_409_and_runs_nothing(replays):
    operation = Operation()
    replays.run("s", "k-2", b'{"a":1}', operation)

    conflict = replays.run("s", "k-2", b'{"a": 1}', operation)  # the same JSON, other bytes

    assert operation.runs == 1
    assert (conflict.status, json.loads(conflict.body)["code"]) == (409, "idempotency_conflict")


def test_a_key_is_scoped_to_its_platform_operation_and_checkout(replays):
    operation = Operation()

    for scope in ("p1\x00cancel\x00chk_a", "p1\x00cancel\x00chk_b", "p2\x00cancel\x00chk_a"):
        replays.run(scope, "same-key", b"", operation)

    assert operation.runs == 3


def test_a_key_being_answered_is_a_409_with_retry_after_until_its_lease_ends(replays, clock):
    inner: list[Answer] = []

    def slow() -> Answer:
        inner.append(replays.run("s", "k-3", b"{}", Operation()))
        clock.now += 61  # past the lease: a retry now takes the key over
        inner.append(replays.run("s", "k-3", b"{}", Operation()))
        return json_answer(200, {})

    replays.run("s", "k-3", b"{}", slow)

    assert (inner[0].status, json.loads(inner[0].body)["code"]) == (409, "request_in_progress")
    assert inner[0].headers["Retry-After"] == "60"
    assert inner[1].status == 200


def test_a_5xx_is_not_kept_so_the_key_runs_again(replays):
    failing, working = Operation(503), Operation()

    replays.run("s", "k-4", b"{}", failing)
    answer = replays.run("s", "k-4", b"{}", working)

    assert (failing.runs, working.runs, answer.status) == (1, 1, 200)


def test_an_answer_older_than_48_hours_is_forgotten(replays, clock):
    operation = Operation()
    replays.run("s", "k-5", b"{}", operation)
    clock.now += KEEP_SECONDS + 1

    replays.run("s", "k-5", b"{}", operation)

    assert operation.runs == 2


@pytest.mark.parametrize("mode", ["refuse", "cut"])
def test_when_the_keys_cannot_be_read_nothing_runs_and_the_answer_is_503(replays, proxy, mode):
    operation = Operation()
    proxy.set(mode)

    answer = replays.run("s", "k-6", b"{}", operation)

    assert operation.runs == 0
    assert (answer.status, json.loads(answer.body)["code"]) == (503, "idempotency_unavailable")
    assert int(answer.headers["Retry-After"]) > 0


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "a\nb"])
def test_a_key_that_is_no_header_value_is_a_400(replays, key):
    operation = Operation()

    answer = replays.run("s", key, b"{}", operation)

    assert (answer.status, operation.runs) == (400, 0)


def test_no_key_runs_every_time(replays):
    operation = Operation()

    replays.run("s", None, b"{}", operation)
    replays.run("s", None, b"{}", operation)

    assert operation.runs == 2


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_an_answer_that_says_not_now_is_not_kept_so_a_retry_runs_again(replays, status):
    transient, working = Operation(status), Operation()

    replays.run("s", f"k-{status}", b"{}", transient)
    answer = replays.run("s", f"k-{status}", b"{}", working)

    assert (transient.runs, working.runs, answer.status) == (1, 1, 200)


def test_an_operation_that_raises_frees_its_key(replays):
    def broken() -> Answer:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):
        replays.run("s", "k-raise", b"{}", broken)
    answer = replays.run("s", "k-raise", b"{}", Operation())

    assert answer.status == 200


def test_an_answer_that_cannot_be_kept_holds_its_key_for_the_lease_then_runs_again(replays, proxy, clock):
    """Storage drops after the request ran, before its answer is kept: the answer still goes out;
    a retry within the lease is told to wait, and one after it runs again (which the checkout's
    own state makes safe)."""
    first = Operation()

    def then_storage_drops() -> Answer:
        answer = first()
        proxy.set("cut")
        return answer

    answered = replays.run("s", "k-late", b"{}", then_storage_drops)
    proxy.set("pass")
    waiting = replays.run("s", "k-late", b"{}", Operation())
    clock.now += 61
    again = Operation()
    rerun = replays.run("s", "k-late", b"{}", again)

    assert answered.status == 200
    assert (waiting.status, json.loads(waiting.body)["code"]) == (409, "request_in_progress")
    assert (rerun.status, again.runs) == (200, 1)

"""shared.exactly_once.executor on its own: a toy operation, "append one line to a blob exactly once", run by
the executor through the real Table store and real Blob storage (the session's Azurite), both
behind fault proxies (`devstack.faultproxy`), with no part of the purchase.

The toy has what the purchase has: a reservation (a slot of the blob's line quota, given back only
by the executor), two recovery points ("before_append", saving the slot; "issued", saving the
result), an effect whose answer can be lost (the append: the line carries a tag derived from the
claim, so a taker looks for it before appending), and result bytes put on record in Blob. The
tests race it, crash it at each recovery point and take it over, lose a write's answer, and cut the
claim store as it starts.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from dataclasses import dataclass

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode
from azure.storage.blob import ContainerClient

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.errors import KeyInUse, LimitExceeded, StorageOutage, StorefrontError, StoreUnavailable
from shared.exactly_once import executor as once
from shared.exactly_once.executor import Done, ExactlyOnce, Key
from shared.exactly_once.idempotency import IdempotencyHandler
from shared.seams.claims import TableClaimStore
from shared.seams.storage import container_client, create_table, table_client
from tests.shared.exactly_once.test_fault_injection import Clock, Crash
from tests.shared.exactly_once.test_fault_injection import TripWire as Wire

LEASE = 60
QUOTA = 8  # lines a blob may take (more than the racers)


def crash() -> None:
    raise Crash()


class WiredHandler(IdempotencyHandler):
    wire: Wire

    def take(self, vacant, fingerprint, result_id, progress):
        self.wire.at("take")
        claimed = super().take(vacant, fingerprint, result_id, progress)
        self.wire.at("claimed")
        return claimed

    def complete(self, claim, body, *, not_after=None):
        self.wire.at("complete")
        return super().complete(claim, body, not_after=not_after)


# --- the toy's stores -------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    blob: str


class Quota:
    """At most QUOTA lines per blob, one counter entity each; a reservation is one slot."""

    def __init__(self, table: TableClient):
        self._table = table

    def reserve(self, blob: str) -> Slot:
        for _ in range(20):
            try:
                entity = self._table.get_entity("quota", blob)
            except ResourceNotFoundError:
                try:
                    self._table.create_entity({"PartitionKey": "quota", "RowKey": blob, "Used": 1})
                    return Slot(blob)
                except ResourceExistsError:
                    continue
            if entity["Used"] >= QUOTA:
                raise LimitExceeded(f"{blob} holds its {QUOTA} lines")
            if self._bump(entity, +1):
                return Slot(blob)
        raise StoreUnavailable("quota too contended", retry_after=1)

    def give_back(self, slot: Slot) -> None:
        for _ in range(20):
            if self._bump(self._table.get_entity("quota", slot.blob), -1):
                return

    def used(self, blob: str) -> int:
        try:
            return self._table.get_entity("quota", blob)["Used"]
        except ResourceNotFoundError:
            return 0

    def _bump(self, entity, by: int) -> bool:
        entity["Used"] += by
        try:
            self._table.update_entity(
                entity,
                mode=UpdateMode.REPLACE,
                etag=entity.metadata["etag"],
                match_condition=MatchConditions.IfNotModified,
            )
        except AzureError as exc:
            if getattr(exc, "status_code", None) == 412:
                return False
            raise
        return True


class Archive:
    """Results on record, one write-once blob each (the executor's ResultArchive)."""

    def __init__(self, container: ContainerClient):
        self._container = container

    def read(self, result_id: str) -> bytes | None:
        try:
            return self._container.download_blob(f"results/{result_id}.json").readall()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise StorageOutage(str(exc)) from exc

    def write_once(self, result_id: str, body: bytes) -> bytes:
        try:
            self._container.upload_blob(f"results/{result_id}.json", body, overwrite=False)
        except ResourceExistsError:
            return self.read(result_id)
        return body


def lines(container: ContainerClient, blob: str) -> list[str]:
    try:
        return container.download_blob(blob).readall().decode().splitlines()
    except ResourceNotFoundError:
        return []


# --- the toy operation ------------------------------------------------------------------------


class AppendLine(once.Operation[Slot]):
    """Append `line` to `blob`, once per key. Its progress: the slot taken and whether the line
    is in; its result: where the line went and when."""

    recovery_points = ("before_append", "issued")

    def __init__(self, blob: str, line: str, lines: ContainerClient, quota: Quota, archive: Archive, env):
        self.blob, self.line = blob, line
        self._result_id = uuid.uuid4().hex
        self._lines, self._quota, self._archive, self._env = lines, quota, archive, env
        self.notes: list[tuple[str, str]] = []
        self.slots: list[Slot] = []
        self.appended = self.attempted = self.resumed = False
        self.body: bytes | None = None

    @property
    def result_id(self) -> str:
        return self._result_id

    def say(self, turn: once.Turn, result: str | None = None) -> str:
        detail = f"toy: {turn.value}"
        if result is not None:
            self.notes.append((result, detail))
        return detail

    def fingerprint(self) -> str:
        return json.dumps([self.blob, self.line])

    def reused(self) -> None:
        pass

    def hold(self, claim) -> None:
        self._result_id = claim.result_id

    def resume(self, progress: dict, result: bytes | None) -> None:
        self.resumed = True
        self.slots = [Slot(b) for b in progress["slots"]]
        self.appended = progress["appended"]
        self.body = result

    def guard(self) -> None:
        self._env.wire.at("guard")
        if not self.slots:  # a taker holds its predecessor's slot
            self.slots.append(self._quota.reserve(self.blob))

    def reservations(self) -> list[Slot]:
        return self.slots

    def give_back(self, reservation: Slot) -> None:
        self._quota.give_back(reservation)
        self._env.given_back += 1

    def perform(self, run: once.Run) -> None:
        if not self.appended:
            run.reached("before_append")
            self._env.wire.at("before_append")
            self._append()
            self._env.wire.at("appended")
        self.body = json.dumps(
            {"blob": self.blob, "line": self.line, "result_id": self.result_id, "at": self._env.clock()}
        ).encode()
        run.reached("issued")
        self._env.wire.at("issued")

    def _append(self) -> None:
        """The effect. The line carries its result id: a taker finds a line its predecessor
        appended without saving so, and appends nothing."""
        self.attempted = True
        tagged = f"{self.line} #{self.result_id}"
        try:
            if self.resumed and tagged in lines(self._lines, self.blob):
                self.appended = True
                return
            blob = self._lines.get_blob_client(self.blob)
            with contextlib.suppress(ResourceExistsError):
                blob.create_append_blob(if_none_match="*")
            # At the length seen: the SDK's retry of an append that landed unanswered fails
            # instead of appending twice.
            size = blob.get_blob_properties().size
            self._env.wire.at("appending")
            blob.append_block(f"{tagged}\n".encode(), appendpos_condition=size)
        except AzureError as exc:
            raise StoreUnavailable(
                f"the line's append went unanswered: {type(exc).__name__}", retry_after=1
            ) from exc
        self.appended = True

    def progress(self) -> dict:
        return {"slots": [s.blob for s in self.slots], "appended": self.appended}

    def result(self) -> bytes | None:
        return self.body

    def effects_may_have_left(self) -> bool:
        return self.attempted or self.appended

    def record(self) -> bytes | None:
        self._env.wire.at("record")
        try:
            return self._archive.write_once(self.result_id, self.body)
        except (AzureError, StorageOutage):
            return None

    def replay_until(self, claim) -> float | None:
        return None


# --- the rig ------------------------------------------------------------------------------------


@dataclass
class Env:
    table: FaultProxy
    blob: FaultProxy
    through: str
    claims_name: str
    container: ContainerClient  # straight to Azurite, for the checks
    quota: Quota  # straight to Azurite, for the checks
    quota_name: str
    wire: Wire
    clock: Clock
    given_back: int = 0

    def executor(self, fail_open: bool = False) -> ExactlyOnce:
        """One instance of the app: its own clients, the same stores."""
        handler = WiredHandler(
            TableClaimStore(table_client(self.through, self.claims_name, 1)),
            self.archive(),
            lease_seconds=LEASE,
            ttl_seconds=3600,
            clock=self.clock,
        )
        handler.wire = self.wire
        return (
            ExactlyOnce(handler, fail_open=True) if fail_open else ExactlyOnce(handler)
        )  # closed by default

    def archive(self) -> Archive:
        return Archive(container_client(self.through, self.container.container_name, 1))

    def operation(self, blob: str, line: str) -> AppendLine:
        container = container_client(self.through, self.container.container_name, 1)
        quota = Quota(table_client(self.through, self.quota_name, 1))
        return AppendLine(blob, line, container, quota, Archive(container), self)

    def run(self, blob: str, line: str, key: str | None, executor: ExactlyOnce | None = None):
        """(the Done, None) or (None, the refusal), and the operation that ran."""
        operation = self.operation(blob, line)
        try:
            done = (executor or self.executor()).run(operation, Key(key) if key else None)
        except StorefrontError as exc:
            return None, exc, operation
        return done, None, operation

    def lines(self, blob: str) -> list[str]:
        return lines(self.container, blob)


@pytest.fixture
def env(azurite):
    table = FaultProxy(endpoint_port(azurite, "Table")).start()
    blob = FaultProxy(endpoint_port(azurite, "Blob")).start()
    suffix = uuid.uuid4().hex[:10]
    container = container_client(azurite, f"toy{suffix}", 5)
    container.create_container()
    quota_table = table_client(azurite, f"quota{suffix}", 5)
    create_table(quota_table)
    create_table(table_client(azurite, f"claims{suffix}", 5))  # a lost answer then loses a claim, not a table
    yield Env(
        table,
        blob,
        proxied(azurite, blob=blob, table=table),
        f"claims{suffix}",
        container,
        Quota(quota_table),
        f"quota{suffix}",
        Wire(),
        Clock(),
    )
    table.stop()
    blob.stop()


def key() -> str:
    return f"k-{uuid.uuid4().hex}"


# --- the tests ----------------------------------------------------------------------------------


def test_a_key_appends_once_and_a_retry_replays_the_same_bytes(env):
    k = key()
    first, _, op = env.run("notes.txt", "hello", k)
    env.clock.now += 5
    again, _, replayed_op = env.run("notes.txt", "hello", k)

    assert env.lines("notes.txt") == [f"hello #{op.result_id}"]
    assert again == Done(first.body, replayed=True)
    assert env.archive().read(op.result_id) == first.body
    assert env.quota.used("notes.txt") == 1
    assert replayed_op.slots == [] and replayed_op.notes == []  # a replay runs nothing of the operation
    assert op.notes == [("pass", "toy: vacant"), ("pass", "toy: claimed")]


def test_without_a_key_each_request_appends(env):
    for _ in range(2):
        done, _, op = env.run("open.txt", "again", None)
        assert done.recorded and op.notes == [("skipped", "toy: unkeyed")]
    assert len(env.lines("open.txt")) == 2 and env.quota.used("open.txt") == 2


def test_the_same_key_with_another_request_is_refused_and_appends_nothing(env):
    k = key()
    env.run("a.txt", "one", k)
    _, refused, op = env.run("a.txt", "two", k)

    assert refused.status == 422 and refused.message == "toy: reused"
    assert len(env.lines("a.txt")) == 1
    assert env.quota.used("a.txt") == 1 and op.slots == []


def test_concurrent_racers_append_one_line_and_all_get_its_bytes(env):
    k, racers = key(), 6
    start = threading.Barrier(racers)
    answers: list[bytes] = []
    refusals: list[StorefrontError] = []

    def race() -> None:
        executor = env.executor()  # one app instance each
        start.wait()
        for _ in range(100):
            done, refused, _ = env.run("race.txt", "mine", k, executor)
            if done is not None:
                answers.append(done.body)
                return
            refusals.append(refused)
            assert isinstance(refused, KeyInUse), refused
            threading.Event().wait(0.05)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert len(answers) == racers and len(set(answers)) == 1
    result = json.loads(answers[0])
    assert env.lines("race.txt") == [f"mine #{result['result_id']}"]
    assert env.quota.used("race.txt") == 1  # the racers that lost the claim gave their slots back
    assert refusals, "no racer met another's claim: the race was not run"


@pytest.mark.parametrize("moment", ["claimed", "before_append", "appended", "issued", "record", "complete"])
def test_a_crash_at_each_recovery_point_is_taken_over_and_appends_once(env, moment):
    k, first_at = key(), env.clock.now
    env.wire.on(moment, crash)
    with pytest.raises(Crash):
        env.run("crash.txt", "once", k)
    early, refused, _ = env.run("crash.txt", "once", k)  # the dead holder's lease still runs
    assert early is None and isinstance(refused, KeyInUse) and refused.message == "toy: in_progress"

    env.clock.now += LEASE + 1
    done, _, taker = env.run("crash.txt", "once", k)

    assert ("pass", "toy: resumed") in taker.notes
    result = json.loads(done.body)
    assert env.lines("crash.txt") == [f"once #{result['result_id']}"]
    assert env.quota.used("crash.txt") == 1  # the slot saved on the claim is not taken again
    assert env.archive().read(result["result_id"]) == done.body
    env.clock.now += 5
    assert env.run("crash.txt", "once", k)[0] == Done(done.body, replayed=True)
    # Once saved at "issued", the result rides on the claim: the taker answers the first run's bytes.
    assert result["at"] == (first_at if moment in ("issued", "record", "complete") else first_at + LEASE + 1)


def test_an_appends_lost_answer_is_resumed_without_a_second_line(env):
    k = key()
    env.wire.on("appending", lambda: env.blob.set("mute"))
    _, refused, first = env.run("lost.txt", "tick", k)
    env.blob.set("pass")

    assert refused.status == 503 and first.attempted
    assert ("pass", "toy: kept") in first.notes  # the claim keeps its progress, the lease ends now
    done, _, taker = env.run("lost.txt", "tick", k)

    assert done is not None and ("pass", "toy: resumed") in taker.notes
    assert len(env.lines("lost.txt")) == 1
    assert env.quota.used("lost.txt") == 1 and env.given_back == 0


def test_a_claim_write_whose_answer_is_lost_keeps_its_slot_and_is_resumed_after_the_lease(env):
    k = key()
    env.wire.on("take", lambda: env.table.set("mute"))
    _, refused, first = env.run("claim.txt", "tock", k)
    env.table.set("pass")

    assert refused.status == 503 and first.notes[-1] == ("fail", "toy: claim_uncertain")
    assert env.lines("claim.txt") == [] and env.quota.used("claim.txt") == 1 and env.given_back == 0
    _, held, _ = env.run("claim.txt", "tock", k)
    assert isinstance(held, KeyInUse)  # the claim landed: its lease keeps the key
    env.clock.now += LEASE + 1
    done, _, taker = env.run("claim.txt", "tock", k)

    assert done is not None and ("pass", "toy: resumed") in taker.notes
    assert len(env.lines("claim.txt")) == 1 and env.quota.used("claim.txt") == 1


def test_a_failure_before_any_effect_gives_the_slot_back_and_frees_the_key(env):
    k = key()

    def refused_upstream() -> None:
        raise StoreUnavailable("not now", retry_after=1)

    env.wire.on("before_append", refused_upstream)
    _, refused, first = env.run("free.txt", "x", k)

    assert refused.status == 503 and first.notes[-1] == ("pass", "toy: released")
    assert env.quota.used("free.txt") == 0 and env.given_back == 1
    done, _, again = env.run("free.txt", "x", k)  # the key is free: the retry runs afresh
    assert done is not None and again.notes == [("pass", "toy: vacant"), ("pass", "toy: claimed")]
    assert len(env.lines("free.txt")) == 1 and env.quota.used("free.txt") == 1


def test_a_refusal_by_the_quota_frees_the_key(env):
    for n in range(QUOTA):
        env.run("full.txt", f"filler {n}", None)
    k = key()
    _, limited, op = env.run("full.txt", "over", k)

    assert isinstance(limited, LimitExceeded) and op.notes[-1] == ("pass", "toy: released")
    assert env.quota.used("full.txt") == QUOTA and len(env.lines("full.txt")) == QUOTA


def test_a_keyed_run_fails_closed_when_the_claim_store_is_down(env):
    env.table.set("cut")
    _, refused, op = env.run("closed.txt", "no", key())

    assert isinstance(refused, StoreUnavailable) and refused.retry_after == 5
    assert op.notes == [("fail", "toy: store_down")]
    assert env.lines("closed.txt") == [] and op.slots == []


def test_fail_open_runs_the_keyed_operation_without_its_claim(env, caplog):
    env.table.set("cut")
    env.wire.on("guard", lambda: env.table.set("pass"))  # the toy's quota lives there too
    done, refused, op = env.run("open.txt", "yes", key(), env.executor(fail_open=True))

    assert refused is None and done.recorded
    assert op.notes[0] == ("degraded", "toy: unprotected")
    assert len(env.lines("open.txt")) == 1
    said = [r.getMessage() for r in caplog.records if r.name == "storefront.exactly_once"]
    assert [w.split(": ")[0] for w in said] == ["idempotency store unreachable, proceeding without it"], said


def test_a_taker_that_fails_before_its_own_effect_keeps_the_claim_for_the_next(env):
    """The first run appended, then died before saving so; its taker fails before looking for the
    line. Only the next taker can find it: the claim is kept with its slot, never freed."""
    k = key()
    env.wire.on("appended", crash)
    with pytest.raises(Crash):
        env.run("twice.txt", "once", k)
    env.clock.now += LEASE + 1

    def refused_upstream() -> None:
        raise StoreUnavailable("not now", retry_after=1)

    env.wire.on("before_append", refused_upstream)
    _, refused, taker = env.run("twice.txt", "once", k)
    assert refused.status == 503 and taker.notes[-1] == ("pass", "toy: kept")
    done, _, last = env.run("twice.txt", "once", k)

    assert ("pass", "toy: resumed") in last.notes
    assert env.lines("twice.txt") == [f"once #{json.loads(done.body)['result_id']}"]
    assert env.quota.used("twice.txt") == 1 and env.given_back == 0


def test_a_recovery_point_the_operation_did_not_declare_is_a_programming_error(env):
    operation = env.operation("undeclared.txt", "x")
    operation.recovery_points = ("before_append",)

    with pytest.raises(ValueError, match="'issued' is not one of the operation's recovery points"):
        env.executor().run(operation, Key(key()))


def test_an_operation_needs_only_its_six_members(env):
    """The hooks default to an operation with no quota, no progress and nothing to derive: a
    minimal operation runs once per key and replays."""
    calls = []

    class Minimal(once.Operation[object]):
        result_id = "minimal"
        body: bytes | None = None

        def say(self, turn: once.Turn, result: str | None = None) -> str:
            return turn.value

        def fingerprint(self) -> str:
            return "same"

        def perform(self, run: once.Run) -> None:
            calls.append("effect")
            self.body = b"done"

        def result(self) -> bytes | None:
            return self.body

        def record(self) -> bytes | None:
            return self.body

    k = Key(key())
    first = env.executor().run(Minimal(), k)
    again = env.executor().run(Minimal(), k)

    assert (first.body, first.replayed) == (b"done", False)
    assert (again.body, again.replayed) == (b"done", True)
    assert calls == ["effect"]


def test_the_executor_imports_nothing_of_the_purchase():
    import ast
    from pathlib import Path

    from shared.exactly_once import idempotency

    forbidden = ("purchase", "brevo", "catalog", "receipts")
    for module in (once, idempotency):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not [m for m in imported if m and any(f in m for f in forbidden)], (module, imported)

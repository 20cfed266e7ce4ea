"""Latency of the replay and fresh paths through the function handler (a real `func.HttpRequest`),
as a ratio to the raw storage and Brevo calls they make, timed in the same run.
BENCH_ITERATIONS sets how many samples each side takes."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable

import requests
from azure.core import MatchConditions

from bench.stack import Handlers, address, keyed

ITERATIONS = int(os.environ.get("BENCH_ITERATIONS", "150"))
IF_UNCHANGED = MatchConditions.IfNotModified


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "n": len(ordered),
    }


def timed(call: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def run(handlers: Handlers) -> dict[str, dict]:
    from azure.data.tables import TableClient
    from azure.storage.blob import ContainerClient
    from azure.storage.queue import QueueClient

    s = handlers.settings
    conn = s.storage_connection_string
    raw_table = TableClient.from_connection_string(conn, table_name=s.idempotency_table)
    raw_blobs = ContainerClient.from_connection_string(conn, s.receipts_container)
    raw_session = requests.Session()
    first = keyed()
    receipt = json.loads(handlers.post(first).get_body())
    claim = next(
        e
        for e in raw_table.list_entities(select=["PartitionKey", "RowKey", "ReceiptId"])
        if e["ReceiptId"] == receipt["receipt_id"]
    )

    for _ in range(20):  # warm every connection pool before timing
        handlers.post(first)
        raw_table.get_entity(claim["PartitionKey"], claim["RowKey"])

    def raw_replay() -> None:
        raw_table.get_entity(claim["PartitionKey"], claim["RowKey"])

    replay_floor = timed(raw_replay, ITERATIONS)
    replay = timed(lambda: handlers.post(first), ITERATIONS)

    scratch = TableClient.from_connection_string(conn, table_name=f"benchraw{uuid.uuid4().hex[:8]}")
    scratch.create_table()
    scratch.create_entity({"PartitionKey": "cost", "RowKey": "d", "Count": 0})
    raw_queue = QueueClient.from_connection_string(conn, f"benchraw{uuid.uuid4().hex[:8]}")
    raw_queue.create_queue()
    sandbox = handlers.stack.sandbox

    def raw_fresh() -> None:
        """The raw calls a fresh keyed purchase makes, one after another, nothing else."""
        pk = uuid.uuid4().hex
        entity = {"PartitionKey": pk, "RowKey": pk, "State": "processing", "Progress": "{}"}
        with contextlib.suppress(Exception):
            scratch.get_entity(pk, pk)
        scratch.create_entity({"PartitionKey": "rate" + pk, "RowKey": "h", "Count": 1})
        scratch.create_entity({"PartitionKey": "rcpt" + pk, "RowKey": "d", "Count": 1})
        cost = scratch.get_entity("cost", "d")
        cost["Count"] += 1
        scratch.update_entity(cost, etag=cost.metadata["etag"], match_condition=IF_UNCHANGED)
        meta = scratch.create_entity(entity)
        raw_queue.send_message("x" * 160, time_to_live=-1)  # a sealed contact's size
        for _ in range(2):
            meta = scratch.update_entity(entity, etag=meta["etag"], match_condition=IF_UNCHANGED)
        raw_session.post(
            f"{sandbox}/v3/smtp/email",
            json={
                "sender": {"email": "s@example.org"},
                "to": [{"email": f"{pk}@example.org"}],
                "subject": "x",
                "textContent": "x",
            },
            headers={"api-key": "bench"},
        )
        raw_blobs.upload_blob(f"raw-{pk}.json", b"{}" * 800)
        scratch.upsert_entity({"PartitionKey": "ledger", "RowKey": pk, "Amount": "0.00"})
        scratch.update_entity(entity, etag=meta["etag"], match_condition=IF_UNCHANGED)

    def fresh() -> None:
        handlers.post(keyed(), ip=address())

    for _ in range(10):
        raw_fresh()
        fresh()
    fresh_floor = timed(raw_fresh, max(ITERATIONS // 2, 20))
    fresh_path = timed(fresh, max(ITERATIONS // 2, 20))
    return {
        "replay": _ratio(replay, replay_floor),
        "fresh": _ratio(fresh_path, fresh_floor),
    }


def _ratio(path: list[float], floor: list[float]) -> dict:
    measured, base = percentiles(path), percentiles(floor)
    return {
        "path": measured,
        "floor": base,
        "ratio_p50": round(measured["p50_ms"] / base["p50_ms"], 3),
        "ratio_p99": round(measured["p99_ms"] / base["p99_ms"], 3),
        "target": 1.3,
    }

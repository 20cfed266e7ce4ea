"""`make bench`: the storefront against its physical floor, measured in one run: round trips per
request (`bench.roundtrips`), latency against the raw calls it makes (`bench.latency`), cold start
(`bench.coldstart`), the daily cost counter under contention (`bench.contention`), one storage
account's capacity (`bench.capacity`), load on two dev hosts (`bench.load`) and a launch spike
(`bench.launch`). It starts its own Azurite and Brevo sandbox (`devstack.services.Stack`), prints
one table and writes bench/results.json (`bench.report`). It is a benchmark, not a test: it never
fails on a time. How to read it, and the BENCH_* variables that scale it: docs/performance.md.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench import capacity, coldstart, contention, latency, launch, load, report, roundtrips
from bench.stack import Handlers
from devstack.services import Stack


def main() -> int:
    stack = Stack(Path(tempfile.mkdtemp(prefix="storefront-bench-")))
    try:
        from devstack.seed_bundles import seed

        seed(stack.connection)
        handlers = Handlers(stack)
        results = {"machine": report.machine()}
        results["round_trips"] = roundtrips.run(handlers)
        results["latency"] = latency.run(handlers)
        results["cold_start"] = coldstart.run(stack)
        results["contention"] = contention.run(stack)
        # After the latency: its hundreds of purchases and shards would slow Azurite's tables.
        results["capacity"] = capacity.run(handlers)
        results["load"] = load.run(stack)
        results["launch"] = launch.run(stack)
    finally:
        stack.stop()
    report.publish(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench`: the storefront against its physical floor, measured in one run.

Starts its own Azurite and Brevo sandbox (`devstack.services.Stack`), then measures:

1. round trips per request, counted on every storage client's transport (and by the sandbox
   for Brevo), next to the floor the design allows (`bench.roundtrips`);
2. latency of the replay and fresh paths through the function handler (a real
   `func.HttpRequest`), as a ratio to the raw storage and Brevo calls they make, timed in the
   same run (`bench.latency`);
3. cold start: importing `function_app` against importing only its third-party dependencies,
   and whether the import opens a network connection (`bench.coldstart`);
4. the daily cost counter under contention (`bench.contention`);
5. capacity: from the calls of 1, where one storage account reaches its first documented
   scalability target (`bench.capacity`);
6. load: two dev host processes on one Azurite, many buyers spread over 127.0.0.0/8 (`bench.load`);
7. launch: a spike of new buyers at ten times Brevo's contacts limit or more, on two dev hosts
   that drain the contact queue on its schedule, with the sandbox's limits scaled to this
   machine (`bench.launch`).

It prints one table and writes bench/results.json (`bench.report`). It is a benchmark, not a
test: it never fails on a time. BENCH_ITERATIONS, BENCH_LOAD_SECONDS, BENCH_LOAD_CLIENTS,
BENCH_LAUNCH_SECONDS and BENCH_LAUNCH_CLIENTS scale it.
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

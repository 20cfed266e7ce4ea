"""What a run reports: the machine it ran on, the printed table, and bench/results.json."""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone

from bench import capacity_table, launch
from devstack.run import ROOT

RESULTS = ROOT / "bench" / "results.json"


def machine() -> dict:
    import azure.data.tables
    import azure.functions
    import azure.storage.blob

    return {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(n, 2) for n in os.getloadavg()],  # 1, 5, 15 min, as the run starts
        "azure_functions": azure.functions.__version__,
        "azure_data_tables": azure.data.tables.__version__,
        "azure_storage_blob": azure.storage.blob.__version__,
        "azurite": json.loads((ROOT / "node_modules" / "azurite" / "package.json").read_text())["version"],
    }


def table(results: dict) -> str:
    lines = [
        "Round trips per request (storage calls at the transport; Brevo calls at the sandbox)",
        f"  {'path':<26} {'status':>6} {'storage':>8} {'floor':>6} {'brevo':>6} {'floor':>6}",
    ]
    for path, r in results["round_trips"].items():
        lines.append(
            f"  {path:<26} {r['status']!s:>6} {r['storage']:>8} {r['floor']:>6} "
            f"{r['brevo']:>6} {r['brevo_floor']:>6}"
        )
    lines += [
        "",
        "Latency through the function handler, against the raw calls it makes (same run)",
        f"  {'path':<8} {'p50 ms':>8} {'floor p50':>10} {'ratio':>7} "
        f"{'p99 ms':>8} {'floor p99':>10} {'ratio':>7}",
    ]
    for path, r in results["latency"].items():
        lines.append(
            f"  {path:<8} {r['path']['p50_ms']:>8} {r['floor']['p50_ms']:>10} {r['ratio_p50']:>7} "
            f"{r['path']['p99_ms']:>8} {r['floor']['p99_ms']:>10} {r['ratio_p99']:>7}"
            f"   (target ≤ {r['target']})"
        )
    c = results["cold_start"]
    lines += [
        "",
        "Cold start (median of fresh interpreters)",
        f"  import function_app {c['import_function_app_ms']} ms / third-party only "
        f"{c['import_third_party_ms']} ms = {c['ratio']} (target ≤ {c['target']}); "
        f"network calls at import: {c['network_calls_at_import']}",
    ]
    ct = results["contention"]
    lines += [
        "",
        f"The daily cost counter with {ct['writers']} concurrent writers (one entity every purchase writes)",
    ]
    for name in ("1 shard", "8 shards"):
        r = ct[name]
        lines.append(
            f"  {name:<9} {r['reservations_per_second']:>8} reservations/s  "
            f"{r['storage_calls_per_reservation']} storage calls each (2 uncontended)"
        )
    lines += ["", *capacity_table.table(results["capacity"])]
    ld = results["load"]
    lines += [
        "",
        f"Load: {ld['hosts']} dev hosts, {ld['clients']} clients, {ld['seconds_per_phase']} s per phase",
    ]
    for name, p in ld["phases"].items():
        lines.append(
            f"  {name:<16} {p['per_second']:>7} req/s  p50 {p['p50_ms']} ms  p99 {p['p99_ms']} ms  "
            f"errors {sum(p['errors'].values())} {p['errors'] or ''}"
        )
    lines.append(f"  peak RSS per host: {', '.join(f'{m} MB' for m in ld['peak_rss_mb'])}")
    lines += ["", *launch.table(results["launch"])]
    return "\n".join(lines)


def publish(results: dict) -> None:
    """Write bench/results.json, then print the table and where the results went."""
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")

"""docs/deploying.md's monthly cost table against its own inputs: every figure is recomputed here from
the inputs table, and the inputs that the repository also records (the round trips of the recorded
bench run, the instance memory and the telemetry cap of the template) must agree with it, so a
changed count or price changes the table or fails here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploying.md"
VOLUMES = (1_000, 100_000, 1_000_000)
# The timers of function_app.py, by the name the cost inputs give them.
SCHEDULED = {
    "drain_contacts": "drain",
    "deliver_order_webhooks": "webhook",
    "repair_receipts": "repair",
    "reap_idempotency_keys": "reap",
}


def _runs_a_day(schedule: str) -> int:
    """Runs a day of an NCRONTAB schedule ("sec min hour day month weekday") that fires every
    day: each of its first three fields is `*`, `*/n` or one value."""
    counts = []
    for field, span in zip(schedule.split()[:3], (60, 60, 24), strict=True):
        counts.append(span if field == "*" else span // int(field[2:]) if field.startswith("*/") else 1)
    assert schedule.split()[3:] == ["*", "*", "*"], schedule
    return counts[0] * counts[1] * counts[2]


def _timers() -> dict[str, int]:
    """Each timer's runs a day, read from function_app.py's own schedules."""
    source = (ROOT / "function_app.py").read_text(encoding="utf-8")
    found = dict(re.findall(r'@app\.timer_trigger\(schedule="([^"]+)"[^\n]*\ndef (\w+)', source))
    by_name = {name: schedule for schedule, name in found.items()}
    assert set(by_name) == set(SCHEDULED), "a timer came or went: give the cost inputs its idle cost"
    return {SCHEDULED[name]: _runs_a_day(schedule) for name, schedule in by_name.items()}


TIMERS = _timers()


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## What it costs")
    return text[start : text.index("\n## ", start + 1)]


def _rows(marker: str) -> dict[str, list[str]]:
    """The table that follows `marker` in the section, by its first cell (backticks dropped)."""
    section = _section()
    lines = section[section.index(marker) :].splitlines()[1:]
    table = [line for line in _until_blank(lines) if line.startswith("|") and not line.startswith("|---")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table[1:]]
    return {row[0].strip("`*"): row[1:] for row in cells}


def _until_blank(lines: list[str]) -> list[str]:
    taken = []
    for line in lines:
        if not line.strip() and taken:
            break
        if line.strip():
            taken.append(line)
    return taken


def inputs() -> dict[str, float | None]:
    """The inputs table: a number, or None where the doc says no price was found."""
    found: dict[str, float | None] = {}
    for name, cells in _rows("<!-- cost inputs -->").items():
        value = cells[0].replace(",", "").lstrip("$")
        found[name] = None if value == "not found" else float(value)
    return found


def _money(x: float) -> str:
    return f"${x:,.2f}"


def figures(i: dict[str, float | None]) -> dict[str, list[str]]:
    """Every row of the cost table, recomputed from the inputs."""
    days = i["days"]
    assert days is not None
    runs = {name: per_day * days for name, per_day in TIMERS.items()}
    timer_runs = sum(runs.values())
    idle_calls = sum(runs[n] * _n(i, f"idle_{n}_calls") for n in TIMERS)
    idle_bytes = sum(runs[n] * _n(i, f"idle_{n}_bytes") for n in TIMERS)
    calls = _n(i, "purchase_storage_calls") + _n(i, "purchase_later_calls")
    cap_gb = _n(i, "log_cap_gb_per_day") * days
    rows: dict[str, list[str]] = {k: [] for k in _rows("<!-- cost table -->")}
    for p in VOLUMES:
        executions = p + timer_runs
        gb_s = _n(i, "instance_memory_gb") * (
            p * _n(i, "purchase_seconds") + timer_runs * _n(i, "timer_run_seconds")
        )
        functions = gb_s * _n(i, "price_gb_s")
        transactions = p * calls + idle_calls
        kv = _n(i, "keyvault_reads") / 10_000 * _n(i, "price_keyvault_10k")
        log_gb = (p * _n(i, "purchase_telemetry_bytes") + idle_bytes) / 1e9
        billed_gb = max(0.0, min(log_gb, cap_gb) - _n(i, "free_log_gb"))
        log = billed_gb * _n(i, "price_log_gb")
        for key, value in (
            ("Functions executions", f"{executions:,.0f}"),
            ("Functions GB-s", f"{gb_s:,.0f}"),
            ("Functions, execution time", _money(functions)),
            ("Storage transactions", f"{transactions:,.0f}"),
            ("Key Vault operations", f"{_n(i, 'keyvault_reads'):,.0f}"),
            ("Key Vault", _money(kv)),
            ("Telemetry GB (estimate)", f"{log_gb:,.2f}"),
            ("Telemetry GB billed", f"{billed_gb:,.2f}"),
            ("Log Analytics", _money(log)),
            ("Total of the priced lines", _money(round(functions, 2) + round(kv, 2) + round(log, 2))),
        ):
            assert key in rows, f"the cost table has no row {key!r}"
            rows[key].append(value)
    return rows


def _n(i: dict[str, float | None], name: str) -> float:
    value = i[name]
    assert value is not None, f"{name} has no number, so no cost can use it"
    return value


def test_every_figure_of_the_cost_table_follows_from_the_inputs():
    stated = _rows("<!-- cost table -->")
    recomputed = figures(inputs())
    priced = {k: v for k, v in recomputed.items() if v}
    assert priced, "the cost table has none of the rows this test recomputes"
    for label, values in priced.items():
        assert stated[label] == values, f"{label}: the doc says {stated[label]}, the inputs give {values}"


def test_the_rows_without_a_price_say_so_and_stay_out_of_the_total():
    i = inputs()
    unpriced = [name for name, value in i.items() if value is None]
    assert {"price_storage_10k", "price_executions", "free_gb_s"} <= set(unpriced)
    stated = _rows("<!-- cost table -->")
    assert all(cell == "not priced" for cell in stated["Storage"]), stated["Storage"]
    assert all(cell == "not priced" for cell in stated["Functions, executions"]), stated[
        "Functions, executions"
    ]


def test_the_per_purchase_storage_and_brevo_counts_are_the_recorded_benchs():
    recorded = json.loads((ROOT / "docs" / "bench-results.json").read_text(encoding="utf-8"))
    fresh = recorded["round_trips"]["fresh, key"]
    later = {
        row["later_calls_per_purchase"] for row in recorded["capacity"]["rows"] if row["path"] == "fresh, key"
    }
    i = inputs()
    assert i["purchase_storage_calls"] == fresh["storage"]
    assert i["purchase_brevo_calls"] == fresh["brevo"]
    assert later == {i["purchase_later_calls"]}


def test_the_instance_memory_and_the_telemetry_cap_are_the_templates():
    functionapp = (ROOT / "infra" / "modules" / "functionapp.bicep").read_text(encoding="utf-8")
    monitoring = (ROOT / "infra" / "modules" / "monitoring.bicep").read_text(encoding="utf-8")
    memory_mb = int(re.search(r"param instanceMemoryMB int = (\d+)", functionapp).group(1))
    cap = int(re.search(r"param dailyQuotaGb int = (\d+)", monitoring).group(1))
    i = inputs()
    assert i["instance_memory_gb"] == memory_mb / 1024
    assert i["log_cap_gb_per_day"] == cap
    assert "alwaysReady" not in functionapp  # the table prices on-demand instances only


def test_the_key_vault_reads_are_the_templates_references_once_a_day():
    functionapp = (ROOT / "infra" / "modules" / "functionapp.bicep").read_text(encoding="utf-8")
    references = len(re.findall(r"@Microsoft\.KeyVault\(", functionapp))
    assert inputs()["keyvault_reads"] == references * inputs()["days"]


@pytest.mark.parametrize("volume", VOLUMES)
def test_the_brevo_rows_give_the_ceiling_and_the_plan_a_volume_needs(volume):
    from shared.config.settings import Settings

    per_purchase = Settings.__dataclass_fields__["cost_per_purchase_usd"].default
    row = _rows("<!-- brevo bounds -->")[f"{volume:,}"]
    per_day = volume / 31
    assert row[0] == f"{math.ceil(per_day):,}"
    assert row[1] == f"`{math.ceil(per_day) * per_purchase:.2f}`"
    assert row[2].startswith("Free") == (math.ceil(per_day) <= 300)

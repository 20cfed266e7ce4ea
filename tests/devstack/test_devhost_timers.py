"""The dev host runs timer triggers on their NCRONTAB schedules, as `func start` does."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from devstack.devhost.timers import Schedule, TimerRunner
from tests.support import ROOT, run_module

pytestmark = pytest.mark.services  # starts processes or servers of its own

T0 = datetime(2026, 12, 7, 6, 3, 44, 500_000, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/10 * * * * *", T0, "2026-12-07T06:03:50"),
        ("0 */15 * * * *", T0, "2026-12-07T06:15:00"),
        ("0 */5 * * * *", T0, "2026-12-07T06:05:00"),
        ("0 0 0 * * *", T0, "2026-12-08T00:00:00"),
        ("30 59 23 31 12 *", T0, "2026-12-31T23:59:30"),
        ("0 0 9 * * 1", T0, "2026-12-07T09:00:00"),  # Mondays at nine: T0 is a Monday morning
        ("0 0 9 * * 0", T0, "2026-12-13T09:00:00"),  # Sundays
        ("5,35 * * * * *", T0, "2026-12-07T06:04:05"),
        ("10-12 * * * * *", T0, "2026-12-07T06:04:10"),
        ("0 0 0 1 1 *", T0, "2027-01-01T00:00:00"),
    ],
)
def test_the_next_time_a_schedule_names(expression, after, expected):
    got = Schedule(expression).next_after(after)
    assert got.strftime("%Y-%m-%dT%H:%M:%S") == expected


@pytest.mark.parametrize(
    "expression", ["* * * * *", "61 * * * * *", "*/0 * * * * *", "a * * * * *", "5-1 * * * * *", ""]
)
def test_a_schedule_the_host_would_refuse_is_refused(expression):
    with pytest.raises(ValueError):
        Schedule(expression)


def test_a_timer_runs_on_its_schedule_and_a_slow_run_is_never_doubled():
    runs: list[float] = []
    busy = threading.Lock()
    overlapped = []

    def work() -> None:
        if not busy.acquire(blocking=False):
            overlapped.append(True)
            return
        runs.append(time.monotonic())
        time.sleep(1.5)  # longer than the one-second schedule
        busy.release()

    runner = TimerRunner([("slow", "* * * * * *", work)])
    runner.start()
    time.sleep(4.2)
    runner.stop()

    assert 2 <= len(runs) <= 3 and not overlapped


def test_a_failing_run_is_logged_and_the_schedule_goes_on(caplog):
    calls = []

    def fails() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    runner = TimerRunner([("fails", "* * * * * *", fails)])
    runner.start()
    time.sleep(2.5)
    runner.stop()

    assert len(calls) >= 2
    assert any("timer fails failed: boom" in r.getMessage() for r in caplog.records)


def test_the_host_refuses_a_timer_the_app_does_not_have_naming_those_it_has():
    result = run_module(
        "devstack.devhost", "--port", "0", "--app-dir", str(ROOT), "--timers", "drain_contact"
    )

    assert result.returncode == 2
    assert "--timers: no timer named drain_contact; the app has " in result.stderr
    assert "drain_contacts" in result.stderr and "Host started" not in result.stdout

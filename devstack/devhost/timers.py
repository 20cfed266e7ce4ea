"""Timer triggers on their schedules, as the Functions host runs them.

A schedule is six-field NCRONTAB (`second minute hour day month day-of-week`), each field `*`, a
number, a range `a-b`, a step `*/n` or `a-b/n`, or a comma list of those; times are UTC, as on
Azure by default. Like the host, a timer whose run is still going when its next time comes skips
that time rather than running twice at once, and a run that raises is logged and the schedule goes
on. A timer never runs on start-up (the app's timers all say `run_on_startup=False`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone

log = logging.getLogger("devhost.timers")

# (lowest, highest) of each field, in NCRONTAB's order.
FIELDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
LOOKAHEAD_SECONDS = 366 * 24 * 3600


class Schedule:
    """A parsed NCRONTAB expression."""

    def __init__(self, expression: str):
        parts = expression.split()
        if len(parts) != 6:
            raise ValueError(f"{expression!r}: a schedule has six fields (second to day of week)")
        self.expression = expression
        self._allowed = [_field(part, low, high) for part, (low, high) in zip(parts, FIELDS, strict=True)]

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after `moment` (whole seconds, UTC) the schedule names."""
        t = moment.astimezone(timezone.utc).replace(microsecond=0) + timedelta(seconds=1)
        end = t + timedelta(seconds=LOOKAHEAD_SECONDS)
        seconds, minutes, hours, days, months, weekdays = self._allowed
        while t < end:
            if t.month not in months:
                t = (t.replace(day=1, hour=0, minute=0, second=0) + timedelta(days=32)).replace(day=1)
            elif t.day not in days or (t.isoweekday() % 7) not in weekdays:
                t = t.replace(hour=0, minute=0, second=0) + timedelta(days=1)
            elif t.hour not in hours:
                t = t.replace(minute=0, second=0) + timedelta(hours=1)
            elif t.minute not in minutes:
                t = t.replace(second=0) + timedelta(minutes=1)
            elif t.second not in seconds:
                t += timedelta(seconds=1)
            else:
                return t
        raise ValueError(f"{self.expression!r} names no time within a year")


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        span, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(v) for v in span.split("-", 1))
        else:
            first = last = int(span)
            if step_text:
                last = high
        if step < 1 or not low <= first <= last <= high:
            raise ValueError(f"{text!r} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


class TimerRunner:
    """Runs each (name, schedule, run) on its schedule in a daemon thread until `stop`."""

    def __init__(
        self,
        timers: Iterable[tuple[str, str, Callable[[], object]]],
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ):
        self._timers = [(name, Schedule(expression), run) for name, expression, run in timers]
        self._now = now
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self._timers]

    def start(self) -> None:
        for name, schedule, run in self._timers:
            thread = threading.Thread(target=self._loop, args=(name, schedule, run), name=f"timer-{name}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()

    def _loop(self, name: str, schedule: Schedule, run: Callable[[], object]) -> None:
        due = schedule.next_after(self._now())
        while not self._stopping.is_set():
            wait = (due - self._now()).total_seconds()
            if wait > 0 and self._stopping.wait(min(wait, 1.0)):
                return
            if wait > 0:
                continue
            try:
                run()
            except Exception as exc:  # the host logs a failed run and keeps the schedule
                log.error("timer %s failed: %s", name, exc)
            due = schedule.next_after(max(self._now(), due))  # times missed while running are skipped

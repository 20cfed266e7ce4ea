"""A pytest plugin loaded into an A2A TCK run (`-p tck_probe`, with tests/a2a on PYTHONPATH).

It writes to the file named by TCK_PROBE_OUT every kit test's outcome and markers and, when the
kit keeps one (1.0), the verdicts its compatibility collector recorded, so
tests/shared/protocols/test_a2a_tck.py judges the run by the kit's own MUST/SHOULD/MAY sorting
rather than by a reading of its output.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

_tests: dict[str, dict] = {}
_collectors: list = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    entry = _tests.setdefault(
        item.nodeid,
        {"markers": sorted({m.name for m in item.iter_markers()}), "outcome": "passed", "message": ""},
    )
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = report.longreprtext[-1500:]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        entry["message"] = str(getattr(report, "wasxfail", "") or report.longrepr)[-500:]
    collector = getattr(item, "funcargs", {}).get("compatibility_collector")
    if collector is not None and not _collectors:
        _collectors.append(collector)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    records = [dataclasses.asdict(r) for c in _collectors for r in c.get_results()]
    with open(os.environ["TCK_PROBE_OUT"], "w") as out:
        json.dump({"tests": _tests, "records": records}, out, indent=1)

"""UCP's official conformance suite (github Universal-Commerce-Protocol/conformance, vendored in
../shared/vendor/ beside the checkout; without it the test is skipped) against a dev host: every
test file run as its README says, with a conformance input for the store's catalog. Every test
passes or is listed in tests/ucp/official-exceptions.yml, failing the way the file says, with the
spec text that says why; a listed test that passes, or fails another way, fails here."""

from __future__ import annotations

import json
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from devstack.ports import free_port
from tests.support import HANG_SECONDS, ROOT, UNKNOWN_BUNDLE_ID, absent_bundle_id, own_venv

SUITE = ROOT.parent / "shared" / "vendor" / "ucp-conformance-fdced3a.tar.gz"
REQUIREMENTS = ROOT / "tests" / "ucp" / "official-requirements.txt"
EXCEPTIONS = ROOT / "tests" / "ucp" / "official-exceptions.yml"
VENV = ROOT / ".venv" / "ucp-conformance"
INPUT = {
    "currency": "USD",
    "items": [{"id": "agent-starter-kit", "title": "Agent Starter Kit", "price": 0}],
    "out_of_stock_item": {"id": absent_bundle_id("no-such-bundle-in-stock"), "title": "Out of stock"},
    "non_existent_item": {"id": UNKNOWN_BUNDLE_ID, "title": "No such bundle"},
}

pytestmark = pytest.mark.services  # the suite runs in a virtualenv of its own


@pytest.fixture(scope="module")
def outcomes(host_factory, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """Every test of the suite: its outcome (pass, failure, error, skipped) and its message."""
    if not SUITE.exists():
        pytest.skip(f"UCP's conformance suite is not in {SUITE.parent}")
    interpreter = own_venv(REQUIREMENTS, VENV) / "python"
    work = tmp_path_factory.mktemp("ucp-official")
    with tarfile.open(SUITE) as suite:
        suite.extractall(work, filter="data")
    (work / "input.json").write_text(json.dumps(INPUT))
    host = host_factory()
    files = sorted(path.name for path in work.glob("*_test.py"))

    def run(name: str) -> dict[str, tuple[str, str]]:
        report = work / f"{name}.xml"
        subprocess.run(
            [str(interpreter), name, f"--server_url={host.url}", "--simulation_secret=not-a-secret"]
            + [f"--conformance_input={work / 'input.json'}", f"--xml_output_file={report}"]
            + [f"--mock_webhook_port={free_port()}", f"--mock_agent_port={free_port()}"],
            cwd=work,
            capture_output=True,
            timeout=HANG_SECONDS,
        )
        assert report.exists(), f"{name} wrote no report"
        found = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            test = f"{name}::{case.get('classname', '').split('.')[-1]}.{case.get('name')}"
            problem = next(
                (case.find(k) for k in ("failure", "error", "skipped") if case.find(k) is not None), None
            )
            text = "" if problem is None else f"{problem.get('message', '')}\n{problem.text or ''}"
            found[test] = ("pass" if problem is None else problem.tag, text)
        return found

    with ThreadPoolExecutor(4) as pool:
        results: dict[str, tuple[str, str]] = {}
        for found in pool.map(run, files):
            results.update(found)
    return results


def listed() -> tuple[str, set[str]]:
    document = yaml.safe_load(EXCEPTIONS.read_text())
    tests = [test for group in document["groups"] for test in group["tests"]]
    assert len(tests) == len(set(tests)), "a test is listed twice"
    assert all(group["intent"] and group["spec"] for group in document["groups"])
    return document["fails_with"], set(tests)


def test_every_test_of_the_suite_ran(outcomes):
    assert len(outcomes) >= 59, sorted(outcomes)


def test_every_test_passes_or_is_listed_with_why(outcomes):
    _, exceptions = listed()

    failing = {test for test, (status, _) in outcomes.items() if status != "pass"}

    assert sorted(failing - exceptions) == [], "failing and not in tests/ucp/official-exceptions.yml"


def test_every_listed_test_still_fails_the_way_the_list_says(outcomes):
    fails_with, exceptions = listed()

    stale = sorted(test for test in exceptions if test not in outcomes or outcomes[test][0] == "pass")
    other = sorted(test for test in exceptions & outcomes.keys() if fails_with not in outcomes[test][1])

    assert stale == [], "listed, but passes now (or no longer exists): take it off the list"
    assert other == [], "listed, but fails another way: " + "\n".join(
        outcomes[t][1][-600:] for t in other[:3]
    )

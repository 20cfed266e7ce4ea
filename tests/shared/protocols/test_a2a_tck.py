"""The official A2A Technology Compatibility Kit (github a2aproject/a2a-tck) against a dev host,
on the JSON-RPC binding: branch 1.0-dev for A2A 1.0 and branch 0.3.x for A2A 0.3, each pinned to
one commit.

The kits come from ../shared/vendor/ beside the checkout when it is there (git archive tarballs),
else from GitHub at the same commit; offline, the test is skipped. Each kit runs as its own pytest
process with tests/a2a/tck_probe.py loaded, which records every check's outcome and the kit's own
verdicts. A check is MUST when the kit says so: the 1.0 kit's `must` marker and MUST records
(a MUST check whose prerequisite failed counts as failed, as the kit reports it); in the 0.3 kit,
its mandatory and capabilities categories and any `mandatory_*` marker. Every MUST failure must be
listed in tests/a2a/tck-exceptions.yml with its reason and the spec text it rests on, and every
check listed there must still fail: a listed check that passes is stale.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from devstack.services import Service
from tests.shared.protocols.test_a2a import start_agent
from tests.support import ROOT

VENDOR = ROOT.parent / "shared" / "vendor"
EXCEPTIONS = ROOT / "tests" / "a2a" / "tck-exceptions.yml"
PROBE_DIR = ROOT / "tests" / "a2a"
KIT_REPO = "a2aproject/a2a-tck"
KIT_TIMEOUT = 300


@dataclass(frozen=True)
class Kit:
    version: str
    commit: str
    # Each pytest run the kit's own runner makes for the categories this suite holds it to.
    runs: tuple[tuple[str, ...], ...]

    @property
    def vendored(self) -> Path:
        return VENDOR / f"a2a-tck-{self.commit[:7]}.tar.gz"


KITS = {
    "1.0": Kit(
        "1.0",
        "357c4a87afa2818731590647cccbea31c31733a2",
        (("tests/compatibility", "--transport=jsonrpc"),),
    ),
    "0.3": Kit(
        "0.3",
        "eb1f804c27ea25db8805264d9ed2d7ca077a7776",
        (
            ("tests/mandatory", "-m", "mandatory_jsonrpc or mandatory_protocol"),
            ("tests/optional/capabilities", "tests/optional/quality", "tests/optional/features"),
        ),
    ),
}
MUST_PATHS_03 = ("tests/mandatory/", "tests/optional/capabilities/")


@pytest.fixture(scope="module")
def tck_agent(logs, azurite, sandbox) -> Iterator[Service]:
    """A dev host for the kits, its limits far above what they send, so no check meets a quota."""
    service = start_agent(
        logs,
        azurite,
        sandbox,
        STOREFRONT_RATE_LIMIT_PER_HOUR="100000",
        STOREFRONT_RECIPIENT_LIMIT_PER_DAY="1000",
        STOREFRONT_DAILY_COST_CEILING_USD="1000",
    )
    yield service
    service.stop()


def unpack_kit(kit: Kit, into: Path) -> Path:
    """The kit's source tree at its pinned commit: the vendored tarball, else GitHub's."""
    if kit.vendored.exists():
        archive = kit.vendored.read_bytes()
    else:
        url = f"https://codeload.github.com/{KIT_REPO}/tar.gz/{kit.commit}"
        try:
            answer = httpx.get(url, timeout=60, follow_redirects=True)
            answer.raise_for_status()
        except httpx.HTTPError as exc:
            pytest.skip(f"A2A TCK {kit.version}: not in {VENDOR}, and {url} is unreachable: {exc}")
        archive = answer.content
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert tar.pax_headers.get("comment") == kit.commit, "the archive is not the pinned commit"
        # Plain files and folders only (the 1.0 tree's one symlink serves its authors' editor).
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        for member in members:
            inside = not member.name.startswith("/") and ".." not in Path(member.name).parts
            assert inside, f"the archive writes outside its folder: {member.name}"
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.10.12
        tar.extractall(into, members=members, **safe)
    roots = [p for p in into.iterdir()]
    return roots[0] if len(roots) == 1 and roots[0].is_dir() else into  # GitHub's has one top folder


def run_kit(kit: Kit, tree: Path, agent: Service, scratch: Path) -> dict:
    """Every run of the kit against the agent; the probe's records of them all, merged."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(PROBE_DIR)
    merged: dict = {"tests": {}, "records": [], "seconds": 0.0}
    for n, selection in enumerate(kit.runs):
        out = scratch / f"probe-{kit.version}-{n}.json"
        host = ["--sut-host", agent.url] if kit.version == "1.0" else [f"--sut-url={agent.url}/api/a2a"]
        scope = [] if kit.version == "1.0" else ["--test-scope=all", "--transports", "jsonrpc"]
        args = [sys.executable, "-m", "pytest", *selection, *host, *scope]
        args += ["-p", "tck_probe", "-p", "no:cacheprovider", "-q", "--tb=short"]
        started = time.monotonic()
        done = subprocess.run(
            args,
            cwd=tree,
            env={**env, "TCK_PROBE_OUT": str(out)},
            capture_output=True,
            text=True,
            timeout=KIT_TIMEOUT,
        )
        merged["seconds"] += time.monotonic() - started
        assert out.exists(), f"the {kit.version} kit did not run:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        probe = json.loads(out.read_text())
        merged["tests"].update(probe["tests"])
        merged["records"] += probe["records"]
    return merged


def must_failures(version: str, probe: dict) -> dict[str, str]:
    """The MUST checks that failed, by node id, each with what the kit said."""
    failed = {}
    for node, test in probe["tests"].items():
        if test["outcome"] in ("failed", "error") and is_must(version, node, test["markers"]):
            failed[node] = test["message"]
    for record in probe["records"]:  # 1.0: the kit's own verdicts, including failed prerequisites
        binding = record["transport"] in ("jsonrpc", "agent_card")
        if record["level"] == "MUST" and binding and not record["passed"] and not record["skipped"]:
            failed.setdefault(record["test_id"], "; ".join(record["errors"]))
    return failed


def is_must(version: str, node: str, markers: list[str]) -> bool:
    if version == "1.0":
        return "must" in markers
    return node.startswith(MUST_PATHS_03) or any(m.startswith("mandatory") for m in markers)


def listed(version: str) -> dict[str, str]:
    """The exceptions for this kit: node id -> the kit's requirement id, each entry checked whole."""
    checks = {}
    for entry in yaml.safe_load(EXCEPTIONS.read_text())[f"a2a-{version}"]:
        assert entry["reason"].strip() and entry["spec"].strip(), f"an entry lacks a reason or spec: {entry}"
        quoted = '"' in entry["spec"] and "§" in entry["spec"]
        assert quoted, f"spec must quote the spec's text and name its section: {entry}"
        for test in entry.get("covered_by", []):
            path, name = test.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(), f"covered_by names no test: {test}"
        checks.update(entry["checks"])
    return checks


def summary(probe: dict) -> str:
    counts: dict[str, int] = {}
    for test in probe["tests"].values():
        counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    return f"{outcomes} in {probe['seconds']:.1f} s"


@pytest.mark.parametrize("version", sorted(KITS))
def test_the_official_tck_finds_no_must_failure_beyond_the_listed_exceptions(version, tck_agent, tmp_path):
    kit = KITS[version]
    probe = run_kit(kit, unpack_kit(kit, tmp_path / "kit"), tck_agent, tmp_path)
    failed, exceptions = must_failures(version, probe), listed(version)

    print(f"A2A TCK {version} ({kit.commit[:7]}): {summary(probe)}; {len(failed)} MUST failures")
    unlisted = {node: why[-600:] for node, why in failed.items() if node not in exceptions}
    assert not unlisted, f"MUST failures not in {EXCEPTIONS.name}:\n" + json.dumps(unlisted, indent=1)
    stale = sorted(set(exceptions) - set(failed))
    assert not stale, f"listed in {EXCEPTIONS.name} but no longer failing (remove them): {stale}"
    ran = [t for t in probe["tests"].values() if t["outcome"] == "passed"]
    assert len(ran) >= 20, f"the {version} kit passed only {len(ran)} checks: did it reach the agent?"

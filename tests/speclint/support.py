"""What the speclint tests share: the crafted manifests and running the command line."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from shared.protocols.mcp.tools import TOOL
from speclint.cli import main
from speclint.findings import Finding
from tests.support import ROOT, run_module

FIXTURES = Path(__file__).parents[1] / "fixtures" / "speclint"


def load(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())["tools"]


def triples(findings: list[Finding]) -> set[tuple[str, str, str, str]]:
    return {(f.rule_id, f.severity, f.tool, f.path) for f in findings}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_module("speclint", *argv, stdin=stdin)


BOUND_SECONDS = 30  # a hostile input's run: far past any --timeout it is given, short of exhausting the host


def run_bounded(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """`python -m speclint argv...` in the repository, its output as bytes, killed after
    BOUND_SECONDS: a run that ignores its own --timeout fails by raising TimeoutExpired."""
    return subprocess.run(
        [sys.executable, "-m", "speclint", *argv],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=BOUND_SECONDS,
    )


def pre_idempotency_tool() -> dict:
    """The storefront's tool as it shipped before idempotency keys."""
    tool = copy.deepcopy(TOOL)
    del tool["inputSchema"]["properties"]["idempotency_key"]
    return tool


def object_schema(**properties: object) -> dict:
    """A closed object schema whose every property is required."""
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": list(properties),
    }

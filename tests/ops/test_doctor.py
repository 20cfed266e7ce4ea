"""azure-functions-doctor's full profile on the app as a fresh clone holds it (infra/ included) and on
the package a publish uploads: no failure, and exactly the warnings below, each with the reason it is
accepted. A new warning fails here until someone reads it and fixes its cause or accepts it below.

The doctor also reads the environment (an activated virtualenv, Application Insights settings) and
local.settings.json; the runs hide the first and a clone has no second, so the result is the same
on every machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ops import package
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

DOCTOR = Path(sys.executable).with_name("azure-functions-doctor")
SHELL_SETTINGS = (
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "UV_PROJECT_ENVIRONMENT",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    "APPINSIGHTS_INSTRUMENTATIONKEY",
)

ACCEPTED = {
    "check_venv": "the run hides an activated virtualenv; make calls .venv/bin/python without activating one",
    "check_local_settings": "gitignored and never shipped; `make run` writes it from the example",
    "check_app_insights": "infra/ sets the connection string on Azure; the doctor reads no Bicep for it",
    "check_host_json_log_level_conflict": "deliberate: Warning by default, Information for the function's "
    "own logs (Function) and request results (Host.Results) only",
}
WITHOUT_CORE_TOOLS = {
    "check_func_cli": "Core Tools is not installed here: the dev host serves the app and azd deploys it",
    "check_func_core_tools_version": "no func to read a version from",
}
PACKAGE_ONLY = {
    "check_funcignore": "a publish never ships .funcignore; the clone's copy passes this check",
}


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The files a fresh clone holds, with work not yet committed (tracked or not ignored)."""
    target = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    """The package a publish uploads, unpacked; like the clone, with modules not yet added to git
    (which `make package` itself refuses until they are)."""
    zipped = tmp_path_factory.mktemp("package") / "storefront.zip"
    package.build(zipped, allow_untracked=True)
    target = tmp_path_factory.mktemp("wwwroot")
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(target)
    return target


def doctor(path: Path) -> tuple[int, list[dict]]:
    assert DOCTOR.exists(), "azure-functions-doctor is in requirements-dev.txt: run `make install`"
    done = subprocess.run(
        [str(DOCTOR), "doctor", "--profile", "full", "--format", "json", "--path", str(path)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in SHELL_SETTINGS},
        timeout=600,  # a bound on a hang, not on speed: ~15 s quiet, over 60 s on a busy 2-core machine
    )
    report = json.loads(done.stdout)
    return done.returncode, [item for section in report["results"] for item in section["items"]]


@pytest.mark.parametrize("target", ["clone", "unpacked"])
def test_the_doctor_finds_no_failure_and_only_the_accepted_warnings(target, request):
    code, items = doctor(request.getfixturevalue(target))
    accepted = {
        **ACCEPTED,
        **(WITHOUT_CORE_TOOLS if shutil.which("func") is None else {}),
        **(PACKAGE_ONLY if target == "unpacked" else {}),
    }
    warned = {item["rule_id"]: item["value"] for item in items if item["status"] == "warn"}

    assert [f"{item['rule_id']}: {item['value']}" for item in items if item["status"] == "fail"] == []
    assert code == 0
    assert {rule: warned[rule] for rule in warned.keys() - accepted.keys()} == {}, "new warnings"
    assert sorted(accepted.keys() - warned.keys()) == [], "accepted warnings no longer given"

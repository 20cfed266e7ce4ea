"""The first `make run` or `make test` installs for minutes: the Makefile says what it installs
before each step, with the time the long one takes, and lets pip and npm show their progress."""

from __future__ import annotations

import re
import subprocess

from tests.support import ROOT


def first_install() -> list[str]:
    """The commands `make install` runs on a fresh clone, in order (a dry run)."""
    plan = subprocess.run(
        ["make", "-n", "--always-make", "install"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert plan.returncode == 0, plan.stderr
    return plan.stdout.splitlines()


def line_of(plan: list[str], command: str) -> int:
    [index] = [i for i, line in enumerate(plan) if line.startswith(command)]
    return index


def test_each_install_step_is_announced_before_it_runs_the_python_one_with_its_time():
    plan = first_install()

    assert plan[line_of(plan, "python3 -m venv .venv") - 1] == (
        'echo "Installing the Python packages into .venv (the first time takes about 3 minutes)"'
    )
    assert plan[line_of(plan, "npm ci --prefix devstack/node22") - 1].startswith('echo "Installing Node 22')
    assert plan[line_of(plan, "npm install") - 1].startswith('echo "Installing Azurite and the MCP clients')


def test_pip_and_npm_show_their_progress():
    plan = first_install()
    pip = plan[line_of(plan, ".venv/bin/python -m pip install --progress-bar on -r requirements-dev.txt")]
    npm = plan[line_of(plan, "npm ci")].split() + plan[line_of(plan, "npm install")].split()

    assert not {"--quiet", "-q"} & set(pip.split())
    assert not {"--silent", "--quiet", "-s", "-q", "--loglevel"} & set(npm)


def test_make_test_spreads_the_files_over_workers_and_reports_the_slowest_tests():
    plan = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    [pytest] = [line.split() for line in plan.stdout.splitlines() if " -m pytest" in line]

    assert pytest[pytest.index("-n") + 1] == "4"
    assert pytest[pytest.index("--dist") + 1] == "loadfile"  # a file's module fixtures start once
    assert "--durations=25" in pytest
    serial = subprocess.run(
        ["make", "-n", "test", "TEST_WORKERS=0"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert " -n 0 " in serial.stdout


def test_the_docs_give_the_order_make_installs_in():
    """docs/development.md lists what the first run sets up "in this order", and the README says
    Node 22 comes first: each is the order of make's own announcements."""
    announcements = [line for line in first_install() if line.startswith('echo "Installing')]
    announced = [line.split(" into ")[1].split()[0].rstrip(",") for line in announcements]
    page = (ROOT / "docs" / "development.md").read_text()
    steps = page.split("The first run sets up, in this order", 1)[1].split("\n\n", 2)[1]
    bullets = [b for b in steps.split("\n- ") if b.strip()]
    firsts = [re.search(r"`([^`]+)`", bullet)[1] for bullet in bullets]
    listed: list[str] = []
    for path in firsts:
        place = next(p for p in announced if path.startswith(p))
        if place not in listed:
            listed.append(place)
    readme = " ".join((ROOT / "README.md").read_text().split())

    assert listed == announced
    assert "`make` first installs Node 22 (into `devstack/node22`)" in readme
    assert announced[0] == "devstack/node22"

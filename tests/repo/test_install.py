"""The first `make run` or `make test` installs for minutes: the Makefile says what it installs
before each step, with the time the long ones take, and lets pip and npm show their progress.
The browser tests drive Debian's chromium, installed system-wide only after saying so, or the
browser CHROMIUM names, which reaches the tests and installs nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support import HANG_SECONDS, ROOT

DEBIAN_CHROMIUM = "/usr/bin/chromium"


def first_install() -> list[str]:
    """The commands `make install` runs on a fresh clone, in order (a dry run)."""
    plan = subprocess.run(
        ["make", "-n", "--always-make", "install"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
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
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS
    )
    [pytest] = [line.split() for line in plan.stdout.splitlines() if " -m pytest" in line]

    assert pytest[pytest.index("-n") + 1] == "4"
    assert pytest[pytest.index("--dist") + 1] == "loadfile"  # a file's module fixtures start once
    assert "--durations=25" in pytest
    serial = subprocess.run(
        ["make", "-n", "test", "TEST_WORKERS=0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
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


def test_make_test_announces_the_suites_own_virtualenvs_and_chromium_before_installing_them():
    plan = subprocess.run(
        ["make", "-n", "--always-make", "test", f"CHROMIUM={DEBIAN_CHROMIUM}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    ).stdout.splitlines()
    [apt_update] = [i for i, line in enumerate(plan) if "apt-get update" in line]

    checkov = plan[line_of(plan, "rm -rf .venv/checkov") - 1]
    ucp = plan[line_of(plan, "rm -rf .venv/ucp-conformance") - 1]
    assert checkov.startswith('echo "Installing checkov into .venv/checkov for the infra scan')
    assert "about a minute the first time" in checkov
    assert ucp.startswith("echo \"Installing UCP's conformance suite's packages into .venv/ucp-conformance")
    assert plan[apt_update - 1].startswith("echo \"Installing Debian's chromium package system-wide")
    assert "make test CHROMIUM=/path/to/it" in plan[apt_update - 1]
    pytest = line_of(plan, "CHROMIUM=/usr/bin/chromium .venv/bin/python -m pytest")
    assert max(line_of(plan, "cp tests/infra/checkov-requirements.txt"), apt_update) < pytest


def test_chromium_names_another_browser_for_the_tests_and_installs_nothing(tmp_path):
    browser = tmp_path / "chrome"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    by_argument = subprocess.run(
        ["make", "-n", "test", f"CHROMIUM={browser}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    ).stdout
    by_environment = subprocess.run(
        ["make", "-n", "test"],
        cwd=ROOT,
        env={**os.environ, "CHROMIUM": str(browser)},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    ).stdout
    seen_by_tests = subprocess.run(
        [sys.executable, "-c", "from tests.browser import CHROMIUM; print(CHROMIUM)"],
        cwd=ROOT,
        env={**os.environ, "CHROMIUM": str(browser)},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )

    for plan in (by_argument, by_environment):
        assert "apt-get" not in plan
        assert f"CHROMIUM={browser} .venv/bin/python -m pytest " in plan
    assert seen_by_tests.stdout == f"{browser}\n", seen_by_tests.stderr


def test_a_chromium_that_does_not_exist_is_refused_never_installed(tmp_path):
    missing = tmp_path / "no-chrome"

    done = subprocess.run(
        ["make", "-s", str(missing), f"CHROMIUM={missing}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )

    assert done.returncode == 2
    assert done.stderr.startswith(f"CHROMIUM={missing} does not exist: name a Chromium or Chrome executable")
    assert "apt-get" not in done.stdout + done.stderr

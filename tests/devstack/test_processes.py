"""devstack.processes, and the suite's own promise built on it: nothing a test session starts
outlives it, whether a test fails, the session gets SIGTERM, or SIGINT where it was started as a
background job (SIGINT ignored), and its services even when the session is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from devstack import processes
from tests.support import HANG_SECONDS, ROOT, as_a_background_job

pytestmark = pytest.mark.services  # starts processes or servers of its own

# A parent that starts a child (with `processes.start` or a plain Popen, per argv[1]), prints the
# child's pid, then waits.
PARENT = """
import subprocess, sys, time
from devstack import processes
start = processes.start if sys.argv[1] == "start" else subprocess.Popen
child = start([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _parent(how: str) -> tuple[subprocess.Popen, int]:
    """A parent started with `processes.start`, and the pid of the child it started `how`."""
    parent = processes.start([sys.executable, "-c", PARENT, how], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return parent, int(parent.stdout.readline())


# A session whose one test holds the sandbox fixture and a child it never stops, writes every pid
# it has started, then fails at once or waits to be signalled.
SESSION_TEST = """
import os, subprocess, sys, time
from pathlib import Path
from devstack import processes

def test_holds_services(sandbox):
    if os.environ["SESSION_END"] != "SIGKILL":  # a child no fixture knows: only the sweep ends it
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pids = processes.descendants(os.getpid())
    Path(os.environ["SESSION_PIDS"]).write_text(" ".join(map(str, pids)))
    assert os.environ["SESSION_END"] != "a failed test"
    time.sleep(600)
"""


def _ended(pids: list[int], timeout: float = HANG_SECONDS) -> list[int]:
    """The pids still running after `timeout` seconds (none, once all have ended)."""
    deadline = time.monotonic() + timeout
    while (running := [pid for pid in pids if processes.alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


def test_stop_ends_the_child_and_what_it_started_in_its_group():
    parent, child = _parent("Popen")
    try:
        processes.stop(parent)

        assert parent.returncode == -signal.SIGTERM
        assert _ended([child]) == []
    finally:
        processes.stop(parent)


def test_a_child_dies_with_its_parent_even_when_the_parent_is_killed():
    parent, child = _parent("start")
    try:
        parent.kill()
        parent.wait()

        assert _ended([child]) == []
    finally:
        processes.stop(parent)


# stop_all in a process of its own (here it would end the session's services): one child it
# started, one it did not; prints how each ended.
STOP_ALL = """
import subprocess, sys
from devstack import processes
sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
started, other = processes.start(sleep), subprocess.Popen(sleep)
processes.stop_all(grace=5)
print(started.returncode, other.wait(timeout=60))
"""


def test_stop_all_ends_the_children_it_started_and_any_other_descendant():
    done = subprocess.run(
        [sys.executable, "-c", STOP_ALL], cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS
    )

    assert done.stdout.split() == [str(-signal.SIGTERM)] * 2, done.stderr


class Session:
    """A pytest session of SESSION_TEST in a folder of its own, started as a background job."""

    def __init__(self, folder: Path, end: str):
        folder.mkdir()
        (folder / "test_session.py").write_text(textwrap.dedent(SESSION_TEST))
        self.end, self.pids, self.log = end, folder / "pids", folder / "session.log"
        env = {**os.environ, "SESSION_END": end, "SESSION_PIDS": str(self.pids), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
        command += ["--rootdir", str(folder), str(folder / "test_session.py")]
        with self.log.open("w") as log:
            self.proc = processes.start(
                as_a_background_job(command), cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def started(self) -> list[int]:
        """The pids its test wrote, once it has."""
        deadline = time.monotonic() + HANG_SECONDS
        while not self.pids.exists() and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.pids.exists(), self.log.read_text()
        return [int(pid) for pid in self.pids.read_text().split()]

    def ended(self) -> int | None:
        """Its exit status after the signal its `end` names (none for a failed test); None if it
        is still running HANG_SECONDS later."""
        if self.end != "a failed test":
            self.proc.send_signal(getattr(signal, self.end))
        try:
            return self.proc.wait(timeout=HANG_SECONDS)
        except subprocess.TimeoutExpired:
            return None


# Per ending: the processes the test had running (the sandbox, and a child no fixture knows but
# under SIGKILL), the session's exit status (1: a test failed, 2: interrupted) and the survivors.
EXPECTED = {
    "a failed test": (2, 1, []),
    "SIGTERM": (2, 2, []),
    "SIGINT": (2, 2, []),
    "SIGKILL": (1, -signal.SIGKILL, []),
}


def test_nothing_a_test_session_starts_outlives_it(tmp_path):
    """Four sessions side by side: one whose test fails, one sent SIGTERM, one SIGINT (which it
    inherited ignored) and one SIGKILL (where only the services it started are promised to go)."""
    sessions = [Session(tmp_path / str(n), end) for n, end in enumerate(EXPECTED)]
    try:
        outcomes = {}
        for session in sessions:
            started = session.started()
            code = session.ended()
            outcomes[session.end] = (len(started), code, _ended(started))
    finally:
        processes.stop(*(session.proc for session in sessions))

    assert outcomes == EXPECTED

"""A port `make run` needs is taken (devstack/taken_ports.py): it names the port and its service,
and prints a `make run PORT=…` and a `python -m devstack.run --port …` on free ports, which start
the stack as printed. And a script that starts `make run PORT=…` in the background waits for it
as docs/development.md shows."""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devstack import processes, taken_ports
from devstack.ports import free_port, free_ports
from tests.snippets import HOST_URL, bash, blocks, snippet
from tests.support import HANG_SECONDS, INSTALLED, ROOT, shell_env

pytestmark = pytest.mark.services  # starts processes of its own

# The suite never reinstalls: `make test` installed first, and a checkout whose stamps predate its
# files would otherwise reinstall into the .venv it shares.


@contextlib.contextmanager
def occupied(*ports: int) -> Iterator[None]:
    """Something else listening on `ports`, as another program would."""
    with contextlib.ExitStack() as stack:
        for port in ports:
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", port))
            s.listen()
        yield


def ended(ports: tuple[int, ...]) -> bool:
    """Whether nothing listens on `ports` any more, waiting out a hang's bound."""
    deadline = time.monotonic() + HANG_SECONDS
    while any(map(taken_ports.listening, ports)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def suggested(message: str) -> tuple[list[str], list[str]]:
    """The make form and the python form the message prints, as argument lists."""
    make, python = [shlex.split(line) for line in message.splitlines() if line.startswith("  ")]
    return make, python


def test_a_taken_port_prints_the_make_and_python_commands_and_the_make_one_starts_the_stack(tmp_path):
    host, sandbox, storage = free_port(), free_port(), free_ports(3)
    data_dir = tmp_path / "azurite"
    options = [f"--port={host}", f"--sandbox-port={sandbox}", f"--storage-port={storage}"]
    with occupied(host):
        command = [sys.executable, "-m", "devstack.run", *options, f"--data-dir={data_dir}"]
        refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
        make, python = suggested(refused.stderr)
        plan = subprocess.run(
            ["make", "--no-print-directory", "-n", *INSTALLED, *make[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        )
        output = tmp_path / "make-run.log"
        with output.open("w") as log:
            stack = processes.start(
                ["make", "--no-print-directory", "-s", *INSTALLED, *make[1:]],
                cwd=ROOT,
                env=shell_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + HANG_SECONDS
            while "Press Ctrl-C to stop everything" not in output.read_text():
                assert stack.poll() is None and time.monotonic() < deadline, output.read_text()[-3000:]
                time.sleep(0.2)
            moved = int(dict(arg.split("=", 1) for arg in make[2:])["PORT"])
            health = requests.get(f"http://127.0.0.1:{moved}/api/health", timeout=HANG_SECONDS)
        finally:
            processes.stop(stack)

    assert refused.returncode == 1
    assert refused.stderr.startswith(f"port {host} (the Functions host) is already in use.")
    assert make[:2] == ["make", "run"]
    assert make[2:] == [
        f"PORT={moved}",
        f"SANDBOX_PORT={sandbox}",
        f"STORAGE_PORT={storage}",
        f"DATA_DIR={data_dir}",
    ]
    assert moved != host
    assert python[1:] == [
        *("-m", "devstack.run", "--port", str(moved), "--sandbox-port", str(sandbox)),
        *("--storage-port", str(storage), "--data-dir", str(data_dir)),
    ]
    assert shlex.split(plan.stdout) == python, "make runs what the python form says"
    assert health.status_code == 200, health.text
    assert ended((moved, sandbox, storage, storage + 2)), "stopping make run stops the stack"


def test_every_taken_port_is_named_and_each_is_moved_to_a_free_one_of_its_own(tmp_path):
    host, sandbox, storage = free_port(), free_port(), free_ports(4)
    with occupied(sandbox, storage + 1, storage + 3):  # Azurite's queue, and the block above it
        busy = taken_ports.taken(host, sandbox, storage)
        message = taken_ports.advice(busy, host, sandbox, storage, taken_ports.DEFAULT_DATA_DIR)
        make, python = suggested(message)
        chosen = dict(arg.split("=", 1) for arg in make[2:])
        new_sandbox, new_storage = int(chosen["SANDBOX_PORT"]), int(chosen["STORAGE_PORT"])
        azurite = range(new_storage, new_storage + 3)
        free_now = [not taken_ports.listening(p) for p in (new_sandbox, *azurite)]

    named = sorted([(storage + 1, "Azurite's queue service"), (sandbox, "the Brevo sandbox")])
    assert message.startswith(f"ports {', '.join(f'{p} ({n})' for p, n in named)} are already in use.")
    assert chosen["PORT"] == str(host), "a free port stays as it was"
    assert new_sandbox > sandbox and new_storage > storage + 3, "past the taken queue port and the next"
    assert all(free_now) and new_sandbox not in azurite
    assert "DATA_DIR" not in chosen and "--data-dir" not in python, "the default folder goes unsaid"


def test_with_nothing_free_near_it_says_which_options_move_the_stack(monkeypatch):
    monkeypatch.setattr(taken_ports, "SEARCHED", 1)  # look at the asked ports only
    host, sandbox, storage = free_port(), free_port(), free_ports(3)
    with occupied(host):
        message = taken_ports.advice(
            taken_ports.taken(host, sandbox, storage), host, sandbox, storage, Path("/tmp/azurite")
        )

    assert message.splitlines()[1:] == [
        "  make run PORT=<port> SANDBOX_PORT=<port> STORAGE_PORT=<first of three>",
        f"  {shlex.split(message.splitlines()[2])[0]} -m devstack.run --port <port> --sandbox-port <port>"
        " --storage-port <first of three>",
    ]


def test_the_readiness_snippet_waits_for_a_background_make_run_then_stops_it(tmp_path):
    host, sandbox, storage = free_port(), free_port(), free_ports(3)
    moved = f"PORT={host} SANDBOX_PORT={sandbox} STORAGE_PORT={storage} DATA_DIR={tmp_path / 'azurite'}"
    # `make` as the reader types it in the checkout, here on this test's ports (see INSTALLED)
    reader = f'make() {{ command make -s -C {ROOT} {" ".join(INSTALLED)} "$@" {moved}; }}\n'
    block = snippet("docs/development.md", "--retry-all-errors")

    done = bash(reader + block.replace(HOST_URL, f"http://localhost:{host}"), tmp_path, timeout=HANG_SECONDS)

    assert done.returncode == 0, done.stderr + (tmp_path / "make-run.log").read_text()[-3000:]
    assert done.stdout.splitlines()[0] == "the stack is ready"
    assert done.stdout.splitlines()[1].startswith("stopped make run (pid ")
    assert "Storefront is running." in (tmp_path / "make-run.log").read_text()
    assert ended((host, sandbox, storage, storage + 2))


def test_the_docs_show_the_message_as_make_run_prints_it(monkeypatch):
    monkeypatch.setattr(taken_ports, "_free", lambda port: port != taken_ports.DEFAULT_HOST_PORT)
    shown = next(
        block.body
        for block in blocks(ROOT / "docs" / "development.md")
        if block.lang == "text" and "is already in use" in block.body
    )

    message = taken_ports.advice(
        ["7071 (the Functions host)"],
        taken_ports.DEFAULT_HOST_PORT,
        taken_ports.DEFAULT_SANDBOX_PORT,
        taken_ports.DEFAULT_STORAGE_PORT,
        taken_ports.DEFAULT_DATA_DIR,
    )

    assert shown == message + "\n"

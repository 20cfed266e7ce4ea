"""speclint's stdio client against real servers: the official Python SDK (both protocol eras, or the
handshake era alone) and TypeScript SDK (1.x, the handshake era), plus a hand-written server for the
protocol edge cases an SDK will not produce (tests/fixtures/speclint_stdio). Each can log what
reached it, so a test sees which revision speclint spoke."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speclint.findings import __version__
from speclint.load import Server, Unreadable
from speclint.protocol import negotiate
from speclint.transports import processes
from speclint.transports.stdio import list_tools
from tests.support import ROOT, run_module

pytestmark = pytest.mark.services  # starts processes or servers of its own

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "speclint_stdio"
SDK_SERVER = [sys.executable, str(FIXTURES / "sdk_server.py")]
RAW_SERVER = [sys.executable, str(FIXTURES / "raw_server.py")]


def received(log: Path) -> list[dict]:
    """The messages a fixture server logged as they reached it."""
    lines = log.read_text().splitlines() if log.exists() else []
    messages = [json.loads(line) for line in lines]
    return [entry.get("message", entry) for entry in messages]


def methods(log: Path) -> list[str]:
    return [message.get("method", "(answer)") for message in received(log)]


def unreadable(command: list[str], timeout: float = 10, **kwargs) -> str:
    """The one-line message list_tools fails with."""
    with pytest.raises(Unreadable) as failure:
        list_tools(command, timeout, **kwargs)
    message = str(failure.value)
    assert "\n" not in message
    return message


def pids(pidfile: Path) -> list[int]:
    return [int(line) for line in pidfile.read_text().split()]


def reaped(pid: int) -> bool:
    """Gone for good: not even a zombie waiting for us."""
    return not Path(f"/proc/{pid}").exists()


def running(pid: int) -> bool:
    """Running: a zombie left to an init that never reaps (as in some containers) is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_lists_every_page_of_a_python_sdk_server(tmp_path):
    log = tmp_path / "received.jsonl"

    listing = list_tools([*SDK_SERVER, "--tools", "5", "--page-size", "2", "--log", str(log)], timeout=10)

    tools = listing.tools
    assert [tool["name"] for tool in tools] == [f"tool_{index}" for index in range(5)]
    assert tools[0]["annotations"] == {"readOnlyHint": True}
    assert tools[0]["inputSchema"]["additionalProperties"] is False
    assert listing.server.protocol_version == "2026-07-28"
    assert methods(log) == ["server/discover", "tools/list", "tools/list", "tools/list"]


def test_speaks_2026_07_28_to_a_server_that_does_with_the_envelope_on_every_request(tmp_path):
    log = tmp_path / "received.jsonl"

    listing = list_tools([*SDK_SERVER, "--tools", "2", "--log", str(log)], timeout=10)

    assert listing.server == Server("speclint-sdk-fixture", "1.0.0", "2026-07-28", 0, "private")
    assert "initialize" not in methods(log)
    for message in received(log):
        assert message["params"]["_meta"] == {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "speclint", "version": __version__},
        }


def test_falls_back_to_initialize_with_a_python_sdk_server_of_the_handshake_era(tmp_path):
    log = tmp_path / "received.jsonl"

    listing = list_tools([*SDK_SERVER, "--legacy", "--page-size", "2", "--log", str(log)], timeout=10)

    assert [tool["name"] for tool in listing.tools] == ["tool_0", "tool_1", "tool_2"]
    assert listing.server == Server("speclint-sdk-fixture", "1.0.0", "2025-11-25")
    assert methods(log) == [
        "server/discover",  # refused: the server does not know it
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/list",
    ]
    assert [message["params"] for message in received(log)[3:]] == [{}, {"cursor": "2"}]


@pytest.mark.skipif(not shutil.which("node"), reason="needs Node")
def test_lists_a_typescript_sdk_server_started_through_a_shell_wrapper():
    server = shlex.join(["node", str(FIXTURES / "sdk_server.mjs")])

    listing = list_tools(["sh", "-c", f"{server}; exit $?"], timeout=10)

    tools = listing.tools
    assert [tool["name"] for tool in tools] == ["get_order", "cancel_order"]
    assert tools[1]["inputSchema"]["required"] == ["orderId", "idempotencyKey"]
    assert tools[1]["annotations"]["idempotentHint"] is True
    assert listing.server == Server("speclint-stdio-fixture-ts", "1.0.0", "2025-11-25")


def test_skips_stdout_noise_and_notifications_and_answers_the_servers_requests():
    tools = list_tools([*SDK_SERVER, "--legacy", "--chatty"], timeout=10).tools

    assert [tool["name"] for tool in tools] == ["tool_0", "tool_1", "tool_2", "probe"]
    assert tools[-1]["description"] == "ping: answered; roots/list: error -32601"


def test_env_adds_to_the_inherited_environment(monkeypatch):
    monkeypatch.setenv("SPECLINT_INHERITED", "kept")
    script = 'echo "token=$SPECLINT_TOKEN inherited=$SPECLINT_INHERITED" >&2; exit 3'

    message = unreadable(["sh", "-c", script], env={"SPECLINT_TOKEN": "given"})

    assert message.endswith(
        "exited with status 3 before answering initialize; stderr: token=given inherited=kept"
    )


def test_a_missing_command_is_named():
    message = unreadable(["speclint-no-such-server", "--stdio"])

    assert message == "cannot start `speclint-no-such-server --stdio`: speclint-no-such-server not found"


def test_a_command_that_is_not_executable_is_named(tmp_path):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")

    assert unreadable([str(script)]).endswith(f"{script} is not executable")


def test_a_server_that_fails_at_start_up_reports_its_status_and_the_end_of_its_stderr():
    complaint = "x" * 1000 + " GITHUB_PERSONAL_ACCESS_TOKEN is not set"

    message = unreadable([*SDK_SERVER, "--crash", complaint])

    before, _, stderr = message.partition("; stderr: ")
    assert before.endswith("exited with status 1 before answering initialize")
    assert stderr.endswith("x GITHUB_PERSONAL_ACCESS_TOKEN is not set")
    assert len(stderr) == processes.STDERR_TAIL_CHARS


def test_a_server_that_never_answers_times_out_on_time_and_its_process_group_is_gone(tmp_path):
    pidfile = tmp_path / "pids"
    server = shlex.join([*RAW_SERVER, "chatter", str(pidfile)])
    started = time.monotonic()

    message = unreadable(["sh", "-c", f"{server}; true"], timeout=0.5)

    assert 0.5 <= time.monotonic() - started < 0.5 + processes.CLOSE_GRACE_SECONDS
    assert message.endswith("did not answer tools/list in time (0.5s for the whole exchange)")
    server_pid, wrapper_pid = pids(pidfile)
    assert reaped(wrapper_pid)
    assert not running(server_pid)


def test_a_server_that_ignores_stdin_closing_and_sigterm_is_killed_with_its_child(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "CLOSE_GRACE_SECONDS", 0.2)
    monkeypatch.setattr(processes, "TERM_GRACE_SECONDS", 0.2)
    monkeypatch.setattr(processes, "KILL_WAIT_SECONDS", 2.0)
    pidfile = tmp_path / "pids"
    started = time.monotonic()

    tools = list_tools([*RAW_SERVER, "stubborn", str(pidfile)], timeout=10).tools

    assert [tool["name"] for tool in tools] == ["read_record"]
    assert time.monotonic() - started < 1.5  # the dead are not waited for until KILL_WAIT_SECONDS
    server_pid, _, child_pid = pids(pidfile)
    assert reaped(server_pid)
    assert not running(child_pid)


@pytest.mark.parametrize(
    "mode",
    [
        "escapes",  # started with the server, found before it is stopped
        "escapes-late",  # started once stdin closes, after that first look
    ],
)
def test_a_child_that_left_the_process_group_is_killed_too(tmp_path, monkeypatch, mode):
    """setsid takes a process out of the group a signal to the group reaches; speclint finds it
    among the server's descendants before each step of stopping it and signals it by pid."""
    monkeypatch.setattr(processes, "CLOSE_GRACE_SECONDS", 0.5)
    monkeypatch.setattr(processes, "TERM_GRACE_SECONDS", 0.2)
    pidfile = tmp_path / "pids"

    tools = list_tools([*RAW_SERVER, mode, str(pidfile)], timeout=10).tools

    assert [tool["name"] for tool in tools] == ["read_record"]
    server_pid, _, child_pid = pids(pidfile)
    assert reaped(server_pid)
    assert not running(child_pid)


def test_a_server_that_runs_out_the_clock_and_ignores_sigterm_is_not_waited_for_seconds_more(tmp_path):
    """Past the deadline each wait before SIGKILL gets SHUTDOWN_FLOOR_SECONDS, not the full graces
    (2 s after closing stdin and 2 s after SIGTERM)."""
    pidfile = tmp_path / "pids"
    started = time.monotonic()

    message = unreadable([*RAW_SERVER, "deaf", str(pidfile)], timeout=0.5)

    full_graces = processes.CLOSE_GRACE_SECONDS + processes.TERM_GRACE_SECONDS
    assert time.monotonic() - started < 0.5 + full_graces / 2
    assert "did not answer tools/list in time" in message
    server_pid, _ = pids(pidfile)
    assert reaped(server_pid)


def test_a_json_rpc_error_is_reported():
    message = unreadable([*RAW_SERVER, "error"])

    assert message.endswith("answered tools/list with JSON-RPC error -32603 database down")


@pytest.mark.parametrize(
    ("mode", "complaint"),
    [
        ("string-id", "answered tools/list with id '3', not 3"),  # after the probe and initialize
        ("parse-error", "answered tools/list with JSON-RPC error -32700 Parse error"),
    ],
)
def test_a_wrong_answer_is_reported_at_once_not_waited_out(mode, complaint):
    assert unreadable([*RAW_SERVER, mode], timeout=30).endswith(complaint)


@pytest.mark.parametrize(
    ("mode", "complaint"),
    [("endless", "(more than 1000 pages)"), ("repeat", "(cursor 'page-2' again)")],
)
def test_pagination_that_does_not_end_is_an_error(mode, complaint):
    message = unreadable([*RAW_SERVER, mode])

    assert message.endswith(f"pagination does not end {complaint}")


def test_a_line_over_16_mib_is_an_error():
    assert unreadable([*RAW_SERVER, "huge"]).endswith("wrote a line over 16 MiB answering tools/list")


def test_over_a_mebibyte_of_stdout_noise_is_an_error_naming_it():
    message = unreadable([*RAW_SERVER, "noisy"])

    assert message.endswith(
        "wrote over 1 MiB to stdout that is not JSON-RPC before answering tools/list "
        "(it began 'INFO handling tools/list, step 0 of the warm-up')"
    )


# ---------------------------------------------------------------- which revision: the probe and the fallback


def raw(mode: str, log: Path, discover: str, *more: str) -> list[str]:
    return [*RAW_SERVER, mode, *more, "--discover", discover, "--log", str(log)]


@pytest.mark.parametrize(
    "discover",
    [
        "unknown",  # -32601, as most servers of the handshake era answer
        "invalid-params",  # -32602, as others do before initialize
        "needs-capability",  # -32021: no verdict on the revision (the SDK falls back on it too)
        "string-result",  # a result that is not an object
        "no-versions",  # an object that is no DiscoverResult
        "versions-not-strings",
        "legacy-versions",  # a DiscoverResult naming only handshake revisions
        "unsupported-legacy",  # -32022 naming only handshake revisions
    ],
)
def test_a_probe_answered_with_anything_but_2026_07_28_falls_back_to_initialize(tmp_path, discover):
    log = tmp_path / "received.jsonl"

    listing = list_tools(raw("plain", log, discover), timeout=10)

    assert [tool["name"] for tool in listing.tools] == ["read_record"]
    assert listing.server == Server("raw-plain", "1.0.0", "2025-06-18")
    assert methods(log)[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert "_meta" not in received(log)[-1]["params"]  # tools/list in the handshake era


def test_a_2026_07_28_server_is_listed_with_its_caching_hints_and_never_initialized(tmp_path):
    log = tmp_path / "received.jsonl"

    listing = list_tools(raw("plain", log, "modern"), timeout=10)  # the server checks the envelope

    assert [tool["name"] for tool in listing.tools] == ["read_record"]
    assert listing.server == Server("raw-modern", "2.0.0", "2026-07-28", 60000, "public")
    assert methods(log) == ["server/discover", "tools/list"]


def test_a_silent_probe_falls_back_once_its_share_of_the_deadline_has_passed(tmp_path):
    log = tmp_path / "received.jsonl"
    started = time.monotonic()

    listing = list_tools(raw("plain", log, "silent"), timeout=6)

    probe = 6 * negotiate.PROBE_SHARE
    assert probe <= time.monotonic() - started < 6
    assert listing.server.protocol_version == "2025-06-18"
    assert methods(log) == ["server/discover", "initialize", "notifications/initialized", "tools/list"]


def test_a_slow_start_that_answers_the_probe_late_is_probed_again_and_spoken_to_in_2026_07_28(tmp_path):
    """The probe gives up at 2 s, the server answers it 2.5 s after reading it (skipped) and then
    refuses the initialize that followed with -32022 naming 2026-07-28: one more probe, and it is
    modern. The margins leave a loaded machine seconds to spare either way."""
    log = tmp_path / "received.jsonl"

    listing = list_tools(raw("plain", log, "slow"), timeout=6)

    assert listing.server.protocol_version == "2026-07-28"
    assert methods(log) == ["server/discover", "initialize", "server/discover", "tools/list"]


def test_a_server_that_exits_on_the_probe_is_started_again_for_the_handshake(tmp_path):
    log, pidfile = tmp_path / "received.jsonl", tmp_path / "pids"

    listing = list_tools(raw("plain", log, "exit", str(pidfile)), timeout=10)

    assert listing.server.protocol_version == "2025-06-18"
    assert methods(log) == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    first, _, second, _ = pids(pidfile)  # two servers: each wrote its pid and its parent's
    assert first != second and reaped(first) and reaped(second)


@pytest.mark.parametrize(
    ("mode", "complaint"),
    [
        ("error", "answered tools/list with JSON-RPC error -32603 database down"),
        ("exit", "exited with status 1 before answering tools/list"),
        ("input-required", "is not a tools list: its resultType is 'input_required', not 'complete'"),
    ],
)
def test_a_server_that_claims_2026_07_28_and_then_fails_is_reported_not_retried_another_way(
    tmp_path, mode, complaint
):
    """The server would answer initialize and list its tool: falling back would hide its failure."""
    log = tmp_path / "received.jsonl"

    assert complaint in unreadable(raw(mode, log, "modern"))
    assert methods(log) == ["server/discover", "tools/list"]


def test_a_server_that_speaks_only_revisions_speclint_does_not_is_told_so_without_a_handshake(tmp_path):
    log = tmp_path / "received.jsonl"

    message = unreadable(raw("plain", log, "unsupported-other"))

    assert "speaks only MCP 2099-01-01; speclint speaks 2026-07-28 and, through initialize," in message
    assert methods(log) == ["server/discover"]


# ---------------------------------------------------------------- the command line: speclint -- COMMAND


def speclint_cli(*argv: str) -> subprocess.CompletedProcess:
    return run_module("speclint", *argv)


def test_cli_lints_a_live_stdio_server_after_double_dash():
    done = speclint_cli("--format", "json", "--fail-on", "medium", "--", *SDK_SERVER, "--tools", "3")

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["tools_checked"] == 3
    assert report["target"].startswith("stdio:") and "sdk_server.py" in report["target"]
    assert {f["rule_id"] for f in report["findings"]} == {"SL005"}  # no outputSchema: low


def test_cli_server_that_fails_to_start_exits_2_with_one_line():
    done = speclint_cli("--", *SDK_SERVER, "--crash", "token missing")

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "token missing" in done.stderr


@pytest.mark.parametrize("argv", [["tools.json", "--", "true"], ["--"], []])
def test_cli_needs_exactly_one_target_or_command(argv):
    done = speclint_cli(*argv)

    assert done.returncode == 2
    assert "give one TARGET, or a command after --" in done.stderr


def test_the_speclint_console_script_installs_from_pyproject_and_runs(tmp_path):
    """pyproject.toml declares `speclint`: build the wheel from a copy of the tree (so no build
    output lands in the repository), install it into a directory and run the script it made."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "speclint", source / "speclint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", source)
    wheels, target = tmp_path / "wheels", tmp_path / "target"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", wheels, source],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("*.whl")
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", target, wheel], capture_output=True, text=True, timeout=120
    )
    assert installed.returncode == 0, installed.stderr

    def script(*argv: object) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, target / "bin" / "speclint", *argv],
            env={**os.environ, "PYTHONPATH": str(target)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = script("--", *SDK_SERVER, "--tools", "2")
    assert done.returncode == 0, done.stderr
    assert "2 tools checked" in done.stdout

    # --engines compiles in a child process, which imports speclint as the script did
    blowup = ROOT / "tests" / "fixtures" / "speclint" / "compile_blowup.json"
    done = script(blowup, "--engines", "--timeout", "5")
    assert done.returncode == 1, done.stderr
    assert "outlines-core: did not finish compiling within its budget" in done.stdout
    assert not (ROOT / "build").exists() and not list(ROOT.glob("*.egg-info"))

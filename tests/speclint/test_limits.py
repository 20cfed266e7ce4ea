"""What one speclint run may spend, whatever the target sends: --timeout bounds the whole run
(reading, the rules, the engines' compiles) and what is read is capped (tools, bytes in all, one
tool's size), each passed limit a one-line exit 2.

Each hostile input here held speclint for seconds to minutes, or gigabytes, before the limits:
the CLI runs with a short --timeout under a subprocess bound of 30 s, so the old code fails by
that bound or by its exit status. Nothing times speclint's own speed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from speclint.limits import MAX_TOOLS, Limits, human, size
from speclint.load import Unreadable, within_limits
from tests.speclint.support import BOUND_SECONDS, FIXTURES, object_schema, run_bounded
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

RAW_SERVER = [sys.executable, str(ROOT / "tests" / "fixtures" / "speclint_stdio" / "raw_server.py")]
speclint = run_bounded


def one_line_exit_2(done: subprocess.CompletedProcess) -> str:
    """The one line a refused run says, after checking that it is one."""
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert done.stdout == b"" and err.count("\n") == 1 and "Traceback" not in err
    return err


# ---------------------------------------------------------------- tools


def test_a_stdio_server_listing_280000_tools_is_refused_at_the_cap():
    """280,000 one-field tools cost 16 s and 1.9 GB against a 5 s timeout before the cap."""
    done = speclint("--timeout", "5", "--", *RAW_SERVER, "many")

    err = one_line_exit_2(done)
    assert f"lists more than {MAX_TOOLS} tools (--max-tools {MAX_TOOLS}" in err


def test_raising_the_tool_cap_still_leaves_the_rules_bound_by_the_timeout():
    done = speclint("--timeout", "3", "--max-tools", "300000", "--", *RAW_SERVER, "many")

    err = one_line_exit_2(done)
    assert "did not finish in time (3s for the whole run, --timeout): the rules had checked" in err
    assert "of 280000 tools" in err


def test_a_lower_tool_cap_refuses_a_list_a_default_run_lints(tmp_path):
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps([{"name": f"t{n}", "inputSchema": object_schema()} for n in range(3)]))

    assert speclint(str(manifest), "--fail-on", "never").returncode == 0
    err = one_line_exit_2(speclint(str(manifest), "--max-tools", "2"))
    assert "lists more than 2 tools (--max-tools 2" in err


# ---------------------------------------------------------------- bytes


def test_a_tool_over_the_tool_size_cap_is_refused_by_name(tmp_path):
    manifest = tmp_path / "tools.json"
    tool = {"name": "wordy", "description": "a " * 600_000, "inputSchema": object_schema()}
    manifest.write_text(json.dumps({"tools": [tool]}))

    err = one_line_exit_2(speclint(str(manifest)))
    assert "tool 'wordy' is 1200" in err and "over --max-tool-bytes (1 MiB)" in err


def test_the_tool_size_cap_is_the_flags(tmp_path):
    manifest = tmp_path / "tools.json"
    tool = {"name": "wordy", "description": "a " * 50_000, "inputSchema": object_schema()}
    manifest.write_text(json.dumps({"tools": [tool]}))

    assert speclint(str(manifest), "--fail-on", "never").returncode == 0
    err = one_line_exit_2(speclint(str(manifest), "--max-tool-bytes", "64K"))
    assert "over --max-tool-bytes (64 KiB)" in err


def test_a_file_over_the_byte_cap_is_refused(tmp_path):
    manifest = tmp_path / "tools.json"
    manifest.write_text((FIXTURES / "clean.json").read_text())

    err = one_line_exit_2(speclint(str(manifest), "--max-bytes", "1K"))
    assert "is over 1 KiB (--max-bytes)" in err


def test_an_endless_device_as_the_target_stops_at_the_byte_cap():
    """/dev/zero was read whole, for ever."""
    err = one_line_exit_2(speclint("/dev/zero", "--timeout", "5"))
    assert "/dev/zero is over 16 MiB (--max-bytes)" in err


def test_a_stdio_server_that_writes_more_than_the_byte_cap_in_all_is_refused():
    err = one_line_exit_2(speclint("--max-bytes", "1M", "--", *RAW_SERVER, "many"))
    assert "wrote over 1 MiB to stdout in all, answering tools/list (--max-bytes)" in err


def test_standard_input_that_never_ends_is_given_up_on_at_the_deadline():
    with subprocess.Popen(
        [sys.executable, "-m", "speclint", "-", "--timeout", "2"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        try:
            process.stdin.write(b'{"tools": [')
            process.stdin.flush()  # and the pipe stays open
            process.wait(timeout=BOUND_SECONDS)
        finally:
            process.kill()
        out, err = process.stdout.read(), process.stderr.read()
    assert process.returncode == 2 and out == b""
    assert b"standard input: did not finish in time (2s for the whole run, --timeout)" in err


@pytest.mark.parametrize(
    ("flag", "value", "complaint"),
    [
        ("--max-bytes", "lots", "not a size"),
        ("--max-bytes", "0", "more than 0"),
        ("--max-tool-bytes", "-1K", "not a size"),
        ("--max-tools", "0", "more than 0"),
        ("--max-tools", "1e6", "not a whole number"),
    ],
)
def test_caps_must_be_positive_sizes_and_counts(flag, value, complaint):
    done = speclint(f"{flag}={value}", "tools.json")
    assert done.returncode == 2 and complaint in done.stderr.decode()


@pytest.mark.parametrize(
    ("text", "count"),
    [("1048576", 1 << 20), ("512K", 512 << 10), ("16M", 16 << 20), ("16MiB", 16 << 20), ("1g", 1 << 30)],
)
def test_sizes_read_as_binary_units_and_print_back(text, count):
    assert size(text) == count
    assert size(human(count)) == count
    assert human(1000) == "1000 bytes"


def test_a_tool_nested_past_the_interpreters_recursion_limit_is_refused_not_a_traceback():
    deep: dict = {"type": "string"}
    for _ in range(sys.getrecursionlimit() + 100):
        deep = {"items": deep}
    with pytest.raises(Unreadable, match="tool 'deep' is nested too deep to read"):
        within_limits([{"name": "deep", "inputSchema": deep}], Limits(), "tools.json")

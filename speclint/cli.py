"""speclint's command line: read the target, lint its tools, print the report, exit with the verdict.

    python -m speclint [--format text|json|sarif] [--fail-on LEVEL] [--engines] TARGET
    python -m speclint [options] -- COMMAND [ARG ...]

TARGET is an MCP endpoint URL, a JSON file holding a tools/list result, or - for standard input;
after --, a command that starts a stdio server. Exit status 0 when nothing is at or above
--fail-on, 1 when something is, 2 when the target could not be read, is over a cap or the run ran
out of time. docs/speclint.md has the targets, limits, formats and exit statuses in full.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from speclint import limits as caps
from speclint.engines.runs import installed_engines
from speclint.findings import SEVERITIES, fails
from speclint.limits import MAX_TIMEOUT_SECONDS, TIMEOUT_SECONDS, Deadline, Limits
from speclint.load import Listing, Unreadable, one_line, read_target
from speclint.output import render_json, render_sarif, render_text
from speclint.rules.lint import lint
from speclint.transports import stdio, streamable_http


def header(value: str) -> tuple[str, str]:
    name, sep, content = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {value!r}")
    return name.strip(), content.strip()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="speclint",
        usage="%(prog)s [options] TARGET\n       %(prog)s [options] -- COMMAND [ARG ...]",
        description="Static spec check for MCP tools: idempotency keys, annotations, input bounds, "
        "local-model compatibility, valid schemas, disclosed side effects. TARGET is an MCP "
        "endpoint URL, a tools/list JSON file or - for stdin; after --, a command that starts a "
        "stdio MCP server.",
    )
    p.add_argument("target", metavar="TARGET", nargs="?", help="MCP endpoint URL, tools/list JSON file, or -")
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="output format")
    p.add_argument(
        "--fail-on",
        choices=(*SEVERITIES, "never"),
        default="high",
        help="exit 1 when a finding is at or above this severity (default: high)",
    )
    p.add_argument(
        "--header",
        type=header,
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header for URL targets (repeatable), e.g. 'Authorization: Bearer ...'",
    )
    p.add_argument(
        "--engines",
        action="store_true",
        help="SL004: compile every input schema with the installed engines (llguidance, "
        "outlines-core) and report their own messages instead of the built-in mirror",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"give up after this long, for the whole run: reading, rules and engine compiles "
        f"(default: {TIMEOUT_SECONDS:g}); each engine compile gets a third of it, at most "
        f"{caps.ENGINE_SECONDS:g} s",
    )
    p.add_argument(
        "--max-tools",
        type=count,
        default=caps.MAX_TOOLS,
        metavar="N",
        help=f"refuse a list of more tools than this (default: {caps.MAX_TOOLS})",
    )
    p.add_argument(
        "--max-bytes",
        type=byte_size,
        default=caps.MAX_BYTES,
        metavar="SIZE",
        help="refuse to read more than this from the target in all, e.g. 64M "
        f"(default: {caps.human(caps.MAX_BYTES)})",
    )
    p.add_argument(
        "--max-tool-bytes",
        type=byte_size,
        default=caps.MAX_TOOL_BYTES,
        metavar="SIZE",
        help=f"refuse a tool bigger than this as JSON (default: {caps.human(caps.MAX_TOOL_BYTES)})",
    )
    return p


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def byte_size(text: str) -> int:
    try:
        return caps.size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    # A terminal or file that cannot encode a tool's name (ASCII, cp1252) gets it escaped rather
    # than a UnicodeEncodeError, whose exit status 1 a CI gate would read as findings.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    p = parser()
    args = p.parse_args(argv)
    if bool(command) == bool(args.target):
        p.error("give one TARGET, or a command after --")
    if not 0 < args.timeout <= MAX_TIMEOUT_SECONDS:  # also refuses nan and inf
        p.error(f"--timeout must be more than 0 and at most {MAX_TIMEOUT_SECONDS:g} seconds")
    target = "stdio:" + shlex.join(command) if command else args.target
    deadline = Deadline.after(args.timeout)
    limits = Limits.for_timeout(
        args.timeout, tools=args.max_tools, bytes=args.max_bytes, tool_bytes=args.max_tool_bytes
    )
    try:
        if args.engines and not installed_engines():
            raise Unreadable(
                "--engines needs llguidance or outlines-core where speclint runs "
                "(pip install llguidance outlines-core)"
            )
        listing = read(args.target or "", command, dict(args.header), deadline, limits)
        findings = lint(listing.tools, engines=args.engines, limits=limits, deadline=deadline)
    except Unreadable as exc:
        print(f"speclint: {one_line(str(exc), 500)}", file=sys.stderr)
        return 2
    if args.format == "json":
        sys.stdout.write(render_json(findings, listing, target, args.fail_on))
    elif args.format == "sarif":
        sys.stdout.write(render_sarif(findings, listing, target))
    else:
        sys.stdout.write(render_text(findings, listing, args.fail_on))
    return 1 if fails(findings, args.fail_on) else 0


def read(
    target: str, command: list[str], headers: dict[str, str], deadline: Deadline, limits: Limits
) -> Listing:
    if command:
        return stdio.list_tools(command, deadline.seconds, limits=limits)
    if target.startswith(("http://", "https://")):
        return streamable_http.list_tools(target, headers, deadline.seconds, limits)
    return read_target(target, limits, deadline)

"""The three report formats: text for people, JSON for scripts, SARIF 2.1.0 for code-scanning tools."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from speclint.findings import RULES, SEVERITIES, Finding, __version__, fails
from speclint.load import Listing, Server, printable

SARIF_LEVEL = {"high": "error", "medium": "warning", "low": "note", "info": "note"}
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def summary(findings: list[Finding]) -> dict[str, int]:
    return {severity: sum(f.severity == severity for f in findings) for severity in reversed(SEVERITIES)}


def describe(server: Server) -> str | None:
    """One line on the server, if anything is known of it: its name and version as it gives
    them, and the protocol revision spoken with it."""
    if server.name is None and server.protocol_version is None:
        return None
    name = " ".join(part for part in (server.name, server.version) if part) if server.name else "(unnamed)"
    revision = f", MCP {server.protocol_version}" if server.protocol_version else ""
    return f"server: {' '.join(name.split())[:120]}{revision}"


def render_text(findings: list[Finding], listing: Listing, fail_on: str) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.severity.upper():<7}{f.rule_id} {f.rule.slug}  {f.tool}  {f.path}")
        lines.append(f"       {f.message}")
        lines.append(f"       fix: {f.fix}")
    if server := describe(listing.server):
        lines.append(server)
    tools = listing.tools
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''} checked"
    if findings:
        totals = ", ".join(f"{n} {severity}" for severity, n in summary(findings).items())
        verdict = "FAIL" if fails(findings, fail_on) else "pass"
        lines.append(
            f"speclint: {count}, {len(findings)} finding(s): {totals} (--fail-on {fail_on}: {verdict})"
        )
    else:
        lines.append(f"speclint: {count}, no findings")
    # Tool names, parameter names and patterns come from the server: no escape sequence of theirs
    # reaches the terminal.
    return "\n".join(printable(line) for line in lines) + "\n"


def render_json(findings: list[Finding], listing: Listing, target: str, fail_on: str) -> str:
    report = {
        "tool": "speclint",
        "version": __version__,
        "target": target,
        "server": _server(listing.server),
        "tools_checked": len(listing.tools),
        "fail_on": fail_on,
        "failed": fails(findings, fail_on),
        "summary": summary(findings),
        "findings": [f.as_dict() for f in findings],
    }
    return json.dumps(report, indent=2) + "\n"


def _server(server: Server) -> dict | None:
    return None if server == Server() else server.as_dict()


def render_sarif(findings: list[Finding], listing: Listing, target: str) -> str:
    rule_index = {rule.id: i for i, rule in enumerate(RULES)}
    is_file = target != "-" and not target.startswith(("http://", "https://", "stdio:"))
    results = []
    for f in findings:
        location: dict = {"logicalLocations": [{"name": f.tool, "fullyQualifiedName": f"{f.tool}{f.path}"}]}
        if is_file:
            location["physicalLocation"] = {"artifactLocation": {"uri": Path(target).as_posix()}}
        fingerprint = hashlib.sha256(
            f"{f.rule_id}\0{f.tool}\0{f.path}".encode("utf-8", "surrogatepass")
        ).hexdigest()
        results.append(
            {
                "ruleId": f.rule_id,
                "ruleIndex": rule_index[f.rule_id],
                "level": SARIF_LEVEL[f.severity],
                "message": {"text": f"{f.tool} {f.path}: {f.message}. Fix: {f.fix}."},
                "locations": [location],
                "partialFingerprints": {"speclintFinding/v1": fingerprint},
                "properties": {"severity": f.severity, "tool": f.tool, "jsonPointer": f.path, "fix": f.fix},
            }
        )
    rules = [
        {
            "id": rule.id,
            "name": rule.slug,
            "shortDescription": {"text": rule.title},
            "fullDescription": {"text": rule.rationale},
            "help": {"text": rule.fix},
            "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
            "properties": {"severity": rule.severity, "tags": ["mcp", "tool-spec"]},
        }
        for rule in RULES
    ]
    run: dict = {
        "tool": {"driver": {"name": "speclint", "version": __version__, "rules": rules}},
        "results": results,
    }
    if is_file:
        run["artifacts"] = [{"location": {"uri": Path(target).as_posix()}}]
    if (server := _server(listing.server)) is not None:
        run["properties"] = {"server": server}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"

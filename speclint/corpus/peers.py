"""Run speclint's peers on the corpus, offline, and put their findings next to speclint's.

    python -m speclint.corpus.peers --venv DIR [--out docs/speclint-peers.json]
    python -m speclint.corpus.peers --speclint-only      # refresh speclint's column only
    python -m speclint.corpus.peers --table              # the table docs/speclint.md shows

Each peer runs from its own virtualenv under ``unshare --net``, reading each dump from a stub stdio
server (this file with ``--serve DUMP``); docs/speclint.md, "Measured on real servers", says how
and what was left out. CI never runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "speclint_corpus"
RUN_TIMEOUT = 600


class Hit(NamedTuple):
    tool: str
    rule: str
    severity: str
    message: str


# Runs in cisco's virtualenv. The CLI's JSON keeps one summary per analyzer and drops rule ids, so
# this calls the same Scanner the CLI's `stdio` subcommand does and prints every finding. One pass
# per analyzer: with YARA in the same pass, the Scanner deletes the description that READINESS reads.
CISCO_DRIVER = """\
import asyncio, json, sys
from mcpscanner import AnalyzerEnum, Config, Scanner
from mcpscanner.core.mcp_models import StdioServer

async def scan(analyzers, command):
    scanner = Scanner(Config())
    server = StdioServer(command=command[0], args=command[1:])
    rows = []
    for name in analyzers.split(","):
        for result in await scanner.scan_stdio_server_tools(server, analyzers=[AnalyzerEnum(name)]):
            for f in result.findings:
                d = f.details
                rule = d.get("rule_id") or d.get("check_id") or d.get("threat_type") or f.threat_category
                rows.append([result.tool_name, f"{name}/{rule}", f.severity, f.summary])
            for e in result.analyzer_errors:
                rows.append([result.tool_name, name + "/analyzer-error", "ERROR", e["message"]])
    print(json.dumps(rows))

asyncio.run(scan(sys.argv[1], sys.argv[2:]))
"""
CISCO_ANALYZERS = "yara,schema,readiness,prompt_defense"

# mcp-lint rules that judge the transport, latency or tool calls: here they would grade the stub.
MCP_LINT_EXCLUDED = "INIT-001,INIT-002,INIT-003,INIT-004,ERR-001,SEC-005,PERF-001,PERF-002,PERF-003,PERF-004"

LEFT_OUT = {
    "name": "mcplint-sec",
    "versions": {"mcplint-sec": "0.6.0"},
    "command": "mcplint scan --json $DUMP",
    "why": "lints MCP client configs (mcpServers) and agent instruction files, not tool lists; "
    'on every dump it answers "configs": [] and no findings',
}


def cisco_hits(stdout: str, out: Path) -> list[Hit]:
    rows = json.loads(stdout.strip().splitlines()[-1])
    return [Hit(tool, rule, severity.lower(), message) for tool, rule, severity, message in rows]


def mcp_lint_hits(stdout: str, out: Path) -> list[Hit]:
    """One hit per entry of a failed rule's details ("'tool.param'; 'tool' (...)")."""
    hits = []
    for result in json.loads(stdout)["results"]:
        if result["status"] in ("fail", "warn", "error"):
            for entry in (result["details"] or result["message"]).split("; "):
                tool = re.match(r"(?:Tool )?'([^'.]*)", entry)
                hits.append(Hit(tool[1] if tool else "", result["ruleId"], result["severity"], entry))
    return hits


def mcplint_cli_hits(stdout: str, out: Path) -> list[Hit]:
    findings = json.loads(out.read_text())["findings"]
    return [Hit(f["location"]["tool_name"], f["rule_id"], f["severity"], f["message"]) for f in findings]


@dataclass(frozen=True)
class Peer:
    """One peer: its pins, the interpreter its release runs on, how to run it and read its output."""

    name: str
    requirements: tuple[str, ...]  # the peer's pin first, then pins its release needs
    python: str  # X.Y
    analyzers: str
    command: Callable[[Path, list[str], Path], list[str]]  # (venv, stub server, out file) -> argv
    hits: Callable[[str, Path], list[Hit]]  # (stdout, out file) -> findings
    columns: tuple[str, ...] = ()  # analyzers that get a column each (their rules read `analyzer/rule`)


PEERS = [
    Peer("cisco-ai-mcp-scanner", ("cisco-ai-mcp-scanner==4.8.7",), "3.11",
         "yara, schema (MCPS-011 $ref), readiness (HEUR-001..020 heuristics), prompt_defense (regex); "
         "not api, llm, meta, behavioral, virustotal, vulnerable_package: they need a key, an LLM "
         "or the network",
         lambda venv, stub, out: [str(venv / "bin" / "python"), "-c", CISCO_DRIVER, CISCO_ANALYZERS, *stub],
         cisco_hits, columns=tuple(CISCO_ANALYZERS.split(","))),
    # Python 3.12: on 3.11 asyncio.wait_for runs mcp-lint's session in another task and anyio
    # refuses to close it ("Attempted to exit cancel scope in a different task").
    Peer("mcp-lint", ("mcp-lint==0.1.0",), "3.12",
         f"every rule but {MCP_LINT_EXCLUDED}",
         lambda venv, stub, out: [str(venv / "bin" / "mcp-lint"), shlex.join(stub), "--format", "json",
                                  "--exclude", MCP_LINT_EXCLUDED],
         mcp_lint_hits),
    # mcp<2: mcplint-cli 0.2.0 reads `serverInfo`, which mcp 2 renamed to `server_info`.
    Peer("mcplint-cli", ("mcplint-cli==0.2.0", "mcp<2"), "3.11",
         "every built-in rule (`mcplint scan`); not benchmark or confusion: they call an LLM",
         lambda venv, stub, out: [str(venv / "bin" / "mcplint"), "scan", "--server", shlex.join(stub),
                                  "--format", "json", "--fail-on", "never", "--output", str(out)],
         mcplint_cli_hits),
]  # fmt: skip


def serve(dump: Path) -> None:
    """A stdio MCP server whose only content is the dump: `initialize`, `tools/list`, `ping`."""
    document = json.loads(dump.read_text())
    info = {"name": document["server"], "version": document["version"]}
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        answer: dict = {"jsonrpc": "2.0", "id": message["id"]}
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            answer["result"] = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        elif method == "tools/list":
            answer["result"] = {"tools": document["tools"]}
        elif method == "ping":
            answer["result"] = {}
        elif method == "tools/call":
            text = "a tools/list dump: no tool can be called"
            answer["result"] = {"content": [{"type": "text", "text": text}], "isError": True}
        else:
            answer["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        print(json.dumps(answer), flush=True)


def stub_command(dump: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--serve", str(dump)]


STUB_TEMPLATE = ["python", "speclint/corpus/peers.py", "--serve", "$DUMP"]


def pip(venv: Path, *args: str) -> str:
    command = [str(venv / "bin" / "python"), "-m", "pip", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def install(peer: Peer, venvs: Path) -> tuple[Path, dict[str, str]]:
    """The peer's own virtualenv (made once, then reused) and the versions pip resolved in it."""
    venv = venvs / peer.name
    if not (venv / "bin" / "python").exists():
        python = [f"python{peer.python}", "-m", "venv", "--clear", str(venv)]
        subprocess.run(python, env=os.environ | {"PYENV_VERSION": peer.python}, check=True)  # pyenv shims
    pip(venv, "install", "--quiet", "--disable-pip-version-check", *peer.requirements)
    installed = {p["name"].lower(): p["version"] for p in json.loads(pip(venv, "list", "--format", "json"))}
    package = peer.requirements[0].split("==")[0]
    return venv, {name: installed[name] for name in (package, "mcp")}


def run(peer: Peer, venv: Path, dump: Path) -> list[Hit]:
    """The peer on one dump, with no network, no key in its environment and a scratch home."""
    with tempfile.TemporaryDirectory(prefix=f"{peer.name}-", dir=venv.parent) as scratch:
        out = Path(scratch) / "report.json"
        env = {
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": scratch,
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # cisco's LiteLLM import would fetch a price list
        }
        command = ["unshare", "--net", "--", *peer.command(venv, stub_command(dump), out)]
        done = subprocess.run(
            command, cwd=scratch, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        try:
            return peer.hits(done.stdout, out)
        except (ValueError, KeyError, IndexError, OSError) as error:
            stderr = "\n".join(done.stderr.strip().splitlines()[-5:])
            message = f"{peer.name} on {dump.name}: exit {done.returncode}, unreadable output ({error})"
            raise SystemExit(f"{message}\n{stderr}") from error


def speclint_hits(document: dict, dump: Path) -> list[Hit]:
    # Imported here: the stub server runs this file as a script, where `tools` is not importable.
    from speclint.load import tools_from
    from speclint.rules.lint import lint

    findings = lint(tools_from(document, str(dump)))
    return [Hit(f.tool, f.rule_id, f.severity, f"{f.path}: {f.message}") for f in findings]


def speclint_source() -> dict:
    """The commit speclint ran from, and its files that differ from it (the column counts those)."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    files = ["speclint", ":!speclint/corpus"]
    status = subprocess.run([*git, "status", "--porcelain", "--", *files], capture_output=True, text=True)
    return {"commit": commit.strip(), "uncommitted": sorted(line[3:] for line in status.stdout.splitlines())}


def tally(hits: list[Hit]) -> dict[str, dict[str, int]]:
    """Findings per rule, then per severity."""
    counts: dict[str, Counter] = {}
    for hit in hits:
        counts.setdefault(hit.rule, Counter())[hit.severity] += 1
    return {rule: dict(sorted(counts[rule].items())) for rule in sorted(counts)}


def where(hits: list[Hit]) -> dict[str, dict[str, list[str]]]:
    """Per rule, each message (the tool's quoted name written '{tool}') and the tools it was given for."""
    grouped: dict[str, dict[str, list[str]]] = {}
    for hit in hits:
        message = hit.message.replace(f"'{hit.tool}'", "'{tool}'") if hit.tool else hit.message
        grouped.setdefault(hit.rule, {}).setdefault(message, []).append(hit.tool)
    return {rule: grouped[rule] for rule in sorted(grouped)}


def cell(counts: dict[str, dict[str, int]], prefix: str) -> str:
    picked = [
        (rule.removeprefix(prefix), sum(n.values())) for rule, n in counts.items() if rule.startswith(prefix)
    ]
    return ", ".join(f"{rule} {n}" for rule, n in picked) or "-"


def table(results: dict) -> str:
    """Per server: its tools, then speclint's findings by rule and each peer's by rule or category."""
    columns = [("speclint", "speclint", "")]
    for peer in results["peers"]:
        name = peer["name"]
        columns += [(f"{name} {a}", name, f"{a}/") for a in peer["columns"]] or [(name, name, "")]
    rows = [*results["servers"].items(), ("**all**", results["all"])]
    lines = [
        "| Server | Tools | " + " | ".join(c[0] for c in columns) + " |",
        "|" + " --- |" * (len(columns) + 2),
    ]
    for label, row in rows:
        cells = [cell(row[name], prefix) for _, name, prefix in columns]
        lines.append(f"| {label} | {row['tools']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


TOP_SEVERITY = ("high", "error")


def total(counts: dict[str, dict[str, int]], prefix: str = "") -> str:
    """ "N (H)": the findings under `prefix`, and how many of them at the peer's top severity."""
    picked = [n for rule, n in counts.items() if rule.startswith(prefix)]
    top = sum(n.get(level, 0) for n in picked for level in TOP_SEVERITY)
    return f"{sum(sum(n.values()) for n in picked)} ({top})"


def summary_table(results: dict) -> str:
    """The docs' table: per server, speclint by rule and each peer's total, top severity in brackets."""
    peers = [(f"{p['name']} {a}", p["name"], f"{a}/") for p in results["peers"] for a in p["columns"]]
    peers += [(p["name"], p["name"], "") for p in results["peers"] if not p["columns"]]
    lines = [
        "| Server | Tools | speclint | speclint by rule | " + " | ".join(c[0] for c in peers) + " |",
        "|" + " --- |" * (len(peers) + 4),
    ]
    for label, row in [*results["servers"].items(), ("**all**", results["all"])]:
        cells = [total(row["speclint"]), cell(row["speclint"], "")]
        cells += [total(row[name], prefix) for _, name, prefix in peers]
        lines.append(f"| {label} | {row['tools']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def refresh_speclint(results: dict) -> dict:
    """`results` with speclint's column recomputed on the corpus; the peers' columns are kept."""
    every: list[Hit] = []
    for dump in sorted(CORPUS.glob("*.json")):
        document = json.loads(dump.read_text())
        if "tools" not in document:
            continue
        hits = speclint_hits(document, dump)
        results["servers"][document["server"]]["speclint"] = tally(hits)
        results["findings"][document["server"]]["speclint"] = where(hits)
        every += hits
    results["all"]["speclint"] = tally(every)
    results["speclint"] = speclint_source()
    return results


def describe(peer: Peer, versions: dict[str, str]) -> dict:
    """What the results file says of a peer: enough to run it again by hand."""
    command = peer.command(Path("$VENV"), STUB_TEMPLATE, Path("$OUT"))
    return {
        "name": peer.name,
        "versions": versions,
        "install": f"python{peer.python} -m venv $VENV && $VENV/bin/pip install "
        + shlex.join(peer.requirements),
        "command": ["unshare", "--net", "--", *command],
        "analyzers": peer.analyzers,
        "columns": list(peer.columns),
    }


def compare(venvs: Path) -> dict:
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        sys.exit("`unshare --net` failed: it is what keeps the peers offline (needs root or user namespaces)")
    venvs.mkdir(parents=True, exist_ok=True)
    installed = {peer.name: install(peer, venvs) for peer in PEERS}
    servers: dict = {}
    findings: dict = {}
    every: dict[str, list[Hit]] = {"speclint": [], **{peer.name: [] for peer in PEERS}}
    for dump in sorted(CORPUS.glob("*.json")):
        document = json.loads(dump.read_text())
        if "tools" not in document:
            continue  # labels.json
        server = document["server"]
        hits = {"speclint": speclint_hits(document, dump)}
        for peer in PEERS:
            hits[peer.name] = run(peer, installed[peer.name][0], dump)
            print(f"{server}: {peer.name} {len(hits[peer.name])} findings", file=sys.stderr)
        servers[server] = {"tools": len(document["tools"])} | {n: tally(h) for n, h in hits.items()}
        findings[server] = {n: where(h) for n, h in hits.items()}
        for name, found in hits.items():
            every[name] += found
    tools = sum(row["tools"] for row in servers.values())
    return {
        "generated_by": "python -m speclint.corpus.peers",
        "corpus": str(CORPUS.relative_to(ROOT)),
        "network": "none: every peer ran under `unshare --net`",
        "stub_server": shlex.join(STUB_TEMPLATE),
        "speclint": speclint_source(),
        "peers": [describe(peer, installed[peer.name][1]) for peer in PEERS],
        "left_out": [LEFT_OUT],
        "servers": servers,
        "all": {"tools": tools} | {name: tally(found) for name, found in every.items()},
        "findings": findings,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="directory for the peers' virtualenvs (kept and reused)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "speclint-peers.json")
    parser.add_argument(
        "--speclint-only",
        action="store_true",
        help="recompute speclint's column in --out and keep the peers' (no peer runs)",
    )
    parser.add_argument("--table", action="store_true", help="print the docs' table from --out and stop")
    parser.add_argument("--serve", type=Path, metavar="DUMP", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if args.table:
        print(summary_table(json.loads(args.out.read_text())))
        return 0
    if args.speclint_only:
        results = refresh_speclint(json.loads(args.out.read_text()))
    elif args.venv is None:
        parser.error("--venv is required (or --speclint-only / --table)")
    else:
        results = compare(args.venv.resolve())
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

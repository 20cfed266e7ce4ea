"""The blocks a reader runs from the README and docs/, and a `make run` stack to run them against.

A block is run as written, with two substitutions (docs/development.md#snippets): the addresses
`make run` serves at by default (http://localhost:7071 and the sandbox's http://localhost:8025)
become the stack's free ports, and AzureWebJobsStorage names its Azurite, as a reader's shell
would for a `python -m devstack.run --storage-port ...`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devstack import processes
from devstack.ports import free_port, free_ports
from devstack.run import storage_connection
from tests.support import HANG_SECONDS, ROOT

RUNNABLE = {"sh", "bash", "shell", "zsh", "python", "py"}
NOT_RUN = re.compile(r"^<!-- not run: (\S.*\S) -->$")
HOST_URL, SANDBOX_URL = "http://localhost:7071", "http://localhost:8025"
BANNER_END = "Press Ctrl-C to stop everything"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str  # without the fence's indentation (a block in a list item is indented)
    above: str
    raw: str  # the lines between the fences as the page has them

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with the line just above each fence."""
    found, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^( {0,3})(`{3,}|~{3,})(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, start = opening[1], opening[2], i
        i += 1
        while i < len(lines) and not lines[i].startswith(indent + fence):
            i += 1
        inside = lines[start + 1 : i]
        body = "\n".join(line.removeprefix(indent) for line in inside) + "\n"
        above = lines[start - 1] if start else ""
        lang = opening[3].strip().split(" ")[0]
        found.append(Block(page, start + 1, lang, body, above, "\n".join(inside) + "\n"))
        i += 1
    return found


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUNNABLE and not NOT_RUN.match(b.above)]


def snippet(page: str, marker: str) -> str:
    (block,) = [b for b in runnable(ROOT / page) if marker in b.body]
    return block.body


def bash(script: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = HANG_SECONDS):
    """`script` run by bash as a reader's terminal would, stopping at the first failing command."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class MakeRun:
    """What `make run` starts (`python -m devstack.run`), from the checkout at `cwd`, on free ports
    and a data folder of its own; a context manager that stops it all."""

    def __init__(self, cwd: Path, data_dir: Path):
        self.cwd, self.data_dir = cwd, data_dir
        self.port, self.sandbox_port, self.storage_port = free_port(), free_port(), free_ports(3)
        self.url = f"http://localhost:{self.port}"
        self.sandbox_url = f"http://localhost:{self.sandbox_port}"
        self.storage = storage_connection(self.storage_port, self.storage_port + 2, self.storage_port + 1)
        self.output = data_dir.parent / f"make-run-{self.port}.log"

    def __enter__(self) -> MakeRun:
        options = [f"--port={self.port}", f"--sandbox-port={self.sandbox_port}"]
        options += [f"--storage-port={self.storage_port}", f"--data-dir={self.data_dir}"]
        with self.output.open("w") as output:  # a file, which the services' logs never fill
            self.proc = processes.start(
                [sys.executable, "-m", "devstack.run", *options],
                cwd=self.cwd,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_for_banner()
        except BaseException:
            processes.stop(self.proc)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        processes.stop(self.proc)

    def _wait_for_banner(self, timeout: float = HANG_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while BANNER_END not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"make run never came up (status {self.proc.poll()}):\n{self.log()[-3000:]}"
                )
            time.sleep(0.1)

    def log(self) -> str:
        return self.output.read_text(errors="replace")

    def run(self, block: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        """A shell block, written for the default `make run`, run against this one."""
        script = block.replace(HOST_URL, self.url).replace(SANDBOX_URL, self.sandbox_url)
        return bash(script, cwd or self.cwd, {"AzureWebJobsStorage": self.storage})

"""What one run of speclint may spend, whatever the target sends (docs/speclint.md, "Limits").

``--timeout`` bounds the whole run: reading the target, the rules and the engines' compiles.
What is read is capped (bytes in all, tools, one tool's size): the rules take time in proportion
to what they read and look at the deadline before each tool, so a run ends within one capped
tool of it. Each engine compile runs in a child process (``speclint.engines.child``) that is
killed at its own budget of time and memory, or at the deadline. This module imports nothing
of speclint's; whoever finds a limit passed raises ``speclint.load.Unreadable``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

TIMEOUT_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 3600.0
MAX_TOOLS = 5000  # the largest server measured lists 26; the rules take about 0.5 ms a tool
MAX_BYTES = 16 << 20  # everything read from the target: every page, every answer, any noise
MAX_TOOL_BYTES = 1 << 20  # one tool as JSON; the rules take about a second on a MiB of text
MAX_PAGES = 1000
ENGINE_SECONDS = 10.0  # one engine on one tool's schema, at most; the corpus's compile in ms
ENGINE_SHARE = 1 / 3  # of --timeout, so one compile that stalls leaves time for the rest
ENGINE_MEMORY_BYTES = 1 << 30  # the engines' process's address space; compiles use under 100 MiB

_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True)
class Limits:
    """The caps of one run: on what is read (``tools``, ``bytes`` in all, one tool's
    ``tool_bytes``) and on each engine compile (``engine_seconds``, ``engine_memory`` bytes)."""

    tools: int = MAX_TOOLS
    bytes: int = MAX_BYTES
    tool_bytes: int = MAX_TOOL_BYTES
    engine_seconds: float = ENGINE_SECONDS
    engine_memory: int = ENGINE_MEMORY_BYTES

    @classmethod
    def for_timeout(cls, timeout: float, **caps: int) -> Limits:
        """The caps given, with each engine compile getting a share of `timeout`."""
        return cls(engine_seconds=min(ENGINE_SECONDS, timeout * ENGINE_SHARE), **caps)


@dataclass(frozen=True)
class Deadline:
    """The end of the run: `seconds` (``--timeout``) after it began."""

    seconds: float
    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0

    def missed(self, doing: str) -> str:
        """The one line saying the run ran out of time while `doing` something."""
        return f"did not finish in time ({self.seconds:g}s for the whole run, --timeout): {doing}"


def size(text: str) -> int:
    """A byte count as a flag gives it: 1048576, 512K, 16M, 16MiB, 1G (K, M, G are binary)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (say 16M, 512K or a number of bytes)")
    count = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if count <= 0:
        raise ValueError("a size must be more than 0")
    return count


def human(count: int) -> str:
    """A byte count as people read it: 16 MiB, 512 KiB, 1000 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count} bytes"

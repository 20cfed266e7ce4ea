"""speclint: a static spec check for MCP tools, before any agent calls them (docs/speclint.md).

    python -m speclint TARGET | -- COMMAND [ARG ...]     (or the `speclint` console script)

The rules live in speclint.core; speclint.words reads what a tool does from its words,
speclint.engines what local-model engines reject, speclint.patterns which regex dialects a pattern
compiles in, speclint.stdio talks to stdio servers. speclint.corpus and speclint.peers are the
scripts that dump real servers and run peer linters for the measurements; CI runs neither.
"""

from speclint.core import RULES, Finding, Rule, Unreadable, __version__, lint, main, tools_from

__all__ = ["RULES", "Finding", "Rule", "Unreadable", "__version__", "lint", "main", "tools_from"]

"""speclint: a static spec check for MCP tools, before any agent calls them (docs/speclint.md).

    python -m speclint TARGET | -- COMMAND [ARG ...]     (or the `speclint` console script)

speclint.cli is the command line: speclint.load reads the target, a saved result or a live server's
pages (speclint.stdio and speclint.streamable_http are the transports; speclint.negotiate picks the
revision, speclint.modern's 2026-07-28 or else speclint.legacy's handshake), speclint.rules runs
the rules (speclint.behaviour and speclint.schema_rules, over speclint.schema) into
speclint.findings, and speclint.output prints them. speclint.words reads what
a tool does from its words, speclint.engines what local-model engines reject, speclint.patterns
which regex dialects a pattern compiles in. speclint.corpus and speclint.peers are the scripts that
dump real servers and run peer linters for the measurements; CI runs neither.
"""

from speclint.cli import main
from speclint.findings import RULES, Finding, Rule, __version__
from speclint.load import Unreadable, tools_from
from speclint.rules import lint

__all__ = ["RULES", "Finding", "Rule", "Unreadable", "__version__", "lint", "main", "tools_from"]

"""What the engines that constrain local models reject or weaken in a tool's input schema.

Local runtimes turn a tool's ``inputSchema`` into a grammar with one of three engines: llguidance,
outlines-core and llama.cpp's own ``json-schema-to-grammar`` converter. An engine *rejects* a schema
when it refuses to compile it (the runtime then fails the request or drops the constraint), and
*weakens* it when it compiles a grammar that lets through values the schema forbids (llama.cpp's
converter prints a warning and accepts any string for a pattern it cannot translate).

* ``builtin_problems(schema)``: pure-Python rules, no engine needed (``speclint.engine_rules``,
  patterns in ``speclint.engine_patterns``). They mirror what the engines were measured to do
  (``tests/fixtures/speclint_hostile.json`` records each engine's verdict on crafted schemas, and
  ``tests/test_speclint_engines.py`` holds these rules to it).
* ``engine_problems(schema)``: compiles the schema with every installed engine and reports the
  engines' own messages (``speclint.engine_runs``). llguidance and outlines-core install from the
  package index as wheels (no torch); llama.cpp's converter is C++ with no Python build, so it is
  never installed here and only the built-in rules speak for it.
* ``installed_engines()``: the engines ``engine_problems`` can run here.

Both return ``Problem`` records, at most one per (JSON Pointer, impact): a pattern that two engines
reject and a third weakens is one "rejected" problem naming the two and one "weakened" problem
naming the third. Engines are imported lazily; importing this module needs the standard library only.

Not reported: constraints an engine ignores without a word where no rewrite of the schema helps
(numeric bounds and uniqueItems in outlines-core; in llama.cpp number bounds, formats other than
date, time, date-time and uuid, patternProperties, and a maxLength or count above 2000, which its
grammar parser turns into "unbounded"). A grammar is a shape; the server still validates every call.
"""

from __future__ import annotations

from speclint.engine_nodes import (
    ENGINES,
    LLAMA_CPP,
    LLGUIDANCE,
    OUTLINES,
    REJECTED,
    WEAKENED,
    Problem,
    declared_types,
)
from speclint.engine_rules import builtin_problems
from speclint.engine_runs import engine_problems, installed_engines, joined, located

__all__ = [
    "ENGINES",
    "LLAMA_CPP",
    "LLGUIDANCE",
    "OUTLINES",
    "REJECTED",
    "WEAKENED",
    "Problem",
    "builtin_problems",
    "declared_types",
    "engine_problems",
    "installed_engines",
    "joined",
    "located",
]

"""speclint: a static spec check for MCP tools, before any agent calls them (docs/speclint.md).

`python -m speclint` runs speclint.cli; docs/speclint.md#code-layout says which sub-package holds what.
"""

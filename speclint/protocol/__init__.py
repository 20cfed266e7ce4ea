"""The MCP protocol revisions speclint speaks to a live server, over any transport."""

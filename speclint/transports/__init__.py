"""The MCP transports speclint reads a live server over: stdio and Streamable HTTP."""

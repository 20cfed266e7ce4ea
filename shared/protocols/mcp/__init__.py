"""MCP: the endpoint, one adapter per wire generation (`legacy`, `modern`) over the same tools, the
form that asks for a missing email, and the sealed `requestState` it round-trips."""

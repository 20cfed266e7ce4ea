"""A2A: the JSON-RPC endpoint, reading its requests, its answer shapes, its vocabulary and the
agent card."""

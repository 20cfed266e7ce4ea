"""The protocol adapters: MCP (each wire generation its own module), A2A and plain HTTP, the
OpenAPI document, pages and downloads. Each turns its requests into one purchase call and its
outcome into that protocol's answer; `http` holds the request and answer primitives they share."""

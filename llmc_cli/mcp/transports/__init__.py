"""Transports move JSON-RPC messages; they know nothing of MCP methods beyond the HTTP headers."""

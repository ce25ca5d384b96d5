"""llmc's built-in MCP servers. `workspace` is the zero-setup default (run in-process)."""

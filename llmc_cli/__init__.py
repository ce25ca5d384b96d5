"""llmc: let any LLM use the tools of any MCP server, under a policy, with an audit trail."""

__version__ = "0.1.0"

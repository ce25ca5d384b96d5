"""Transports move JSON-RPC messages; they know nothing of MCP methods beyond the HTTP headers.

The package's lazy interface (llmc_cli.lazy_names) is the transports' start-up seam: a transport's
module (and what it imports: subprocess for stdio, queue for the in-memory one) loads when
mcp/client.py first makes one. A call through a session keeper makes neither."""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

_WHERE = {"MemoryTransport": "llmc_cli.mcp.transports.memory", "StdioTransport": "llmc_cli.mcp.transports.stdio"}

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.mcp.transports.memory import MemoryTransport
    from llmc_cli.mcp.transports.stdio import StdioTransport
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)

__all__ = ["MemoryTransport", "StdioTransport"]

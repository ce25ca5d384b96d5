"""The MCP protocol versions llmc speaks, declared once for its client and its servers.

Versions are dates, so string order is time order. The modern era (2026-07-28 on) has no
initialize handshake: every request carries its version in `_meta` under META_PREFIX.
"""

from __future__ import annotations

from llmc_cli.errors import RpcError
from llmc_cli.mcp import jsonrpc

MODERN_VERSIONS = ("2026-07-28",)  # newest first
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS
MODERN_FROM = min(MODERN_VERSIONS)  # the first version without the handshake
META_PREFIX = "io.modelcontextprotocol/"


def supported_versions(exc: RpcError) -> list[str]:
    """The versions an UnsupportedProtocolVersion error lists (`data.supported`), else []."""
    if exc.code != jsonrpc.UNSUPPORTED_PROTOCOL_VERSION or not isinstance(exc.data, dict):
        return []
    supported = exc.data.get("supported")
    return [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []


def retry_version(exc: RpcError) -> str | None:
    """The best modern version both sides speak, when the error is an UnsupportedProtocolVersion."""
    offered = supported_versions(exc)
    return next((v for v in MODERN_VERSIONS if v in offered), None)

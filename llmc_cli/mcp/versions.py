"""The MCP protocol versions llmc speaks, declared once for its client and its servers.

Versions are dates, so string order is time order. The modern era (2026-07-28 on) has no
initialize handshake: every request carries its version in `_meta` under META_PREFIX.
"""

MODERN_VERSIONS = ("2026-07-28",)  # newest first
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
SUPPORTED_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS
MODERN_FROM = min(MODERN_VERSIONS)  # the first version without the handshake
META_PREFIX = "io.modelcontextprotocol/"

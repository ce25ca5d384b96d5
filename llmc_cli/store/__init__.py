"""State behind small protocols: files by default (a PostgreSQL store for `[state] url` is the
planned second implementation). The protocols live where they are used (mcp/stores.py for what
the protocol package remembers); the implementations live here, so mcp/ never learns where
files are.

era_cache.py  servers.json: era, transport and version per server, remembered HTTP sessions
tokens.py     oauth/: one 0600 file per authorization server and resource
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmc_cli.mcp.stores import Stores


def client_stores() -> "Stores":
    """The file-backed stores every command hands to connect(), under the state directory
    (resolved now, not at import: tests point LLMC_STATE_DIR elsewhere)."""
    from llmc_cli.config import paths
    from llmc_cli.mcp.stores import Stores
    from llmc_cli.store.era_cache import FileEraCache
    from llmc_cli.store.tokens import FileTokenStore

    state = paths.state_dir()
    return Stores(era_cache=FileEraCache(state / "servers.json"), tokens=FileTokenStore(state / "oauth"))

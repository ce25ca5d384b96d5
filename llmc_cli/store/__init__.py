"""State behind small protocols: files by default (a PostgreSQL store for `[state] url` is the
planned second implementation). The protocols live where they are used (mcp/stores.py for what
the protocol package remembers); the implementations live here, so mcp/ never learns where
files are.

era_cache.py  servers.json: era, transport and version per server, remembered HTTP sessions
tokens.py     oauth/: one 0600 file per authorization server and resource
results.py    results/: cached tool results ([cache]), or the [state] url database's table
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmc_cli.mcp.stores import Stores
    from llmc_cli.store.tokens import FileTokenStore


def token_store() -> FileTokenStore:
    """The OAuth logins under the state directory (`oauth/`, one 0600 file per server)."""
    from llmc_cli.config import paths
    from llmc_cli.store.tokens import FileTokenStore

    return FileTokenStore(paths.state_dir() / "oauth")


def client_stores() -> Stores:
    """The file-backed stores every command hands to connect(), under the state directory
    (resolved now, not at import: tests point LLMC_STATE_DIR elsewhere)."""
    from llmc_cli.config import paths
    from llmc_cli.mcp.stores import Stores
    from llmc_cli.store.era_cache import FileEraCache

    return Stores(era_cache=FileEraCache(paths.state_dir() / "servers.json"), tokens=token_store())

"""State behind small protocols, in files by default or in the PostgreSQL database that `[state]
url` (or LLMC_STATE_URL) names. services/state.py chooses one per command or gateway and hands
it on; nothing else asks "files or PostgreSQL?". What the protocol package remembers (EraCache,
TokenStore) is declared in mcp/stores.py and kept in files here, so mcp/ never learns where.

state.py      the protocols RateWindows, Approvals, HostSessions, and the bundles FileState and
              PostgresState (with results.py's ResultCache)
chain.py      the audit record and the AuditSink call_tool writes through (audit/ keeps the chain)
windows.py    ratelimit.json: the rate limits' windows, under a file lock
approvals.py  the profile's own [policy] approved list
results.py    results/: cached tool results ([cache]), one 0600 file per entry
era_cache.py  servers.json: era, transport and version per server, remembered HTTP sessions
tokens.py     oauth/: one 0600 file per authorization server and resource
postgres/     the database: connection and migrations (__init__.py), then one module per concern:
              chain.py, rate.py, approvals.py, results.py, sessions.py
"""

from __future__ import annotations

from llmc_cli.config import paths
from llmc_cli.mcp.stores import Stores
from llmc_cli.store.era_cache import FileEraCache
from llmc_cli.store.tokens import FileTokenStore


def token_store() -> FileTokenStore:
    """The OAuth logins under the state directory (`oauth/`, one 0600 file per server)."""
    return FileTokenStore(paths.state_dir() / "oauth")


def client_stores() -> Stores:
    """The file-backed stores every command hands to connect(), under the state directory
    (resolved now, not at import: tests point LLMC_STATE_DIR elsewhere)."""
    return Stores(era_cache=FileEraCache(paths.state_dir() / "servers.json"), tokens=token_store())

"""Remembered HTTP sessions: the `Mcp-Session-Id` a Streamable HTTP server of the initialize era
gave, kept between llmc invocations so the server's state (handles, processes) outlives one
command (2025-11-25 basic/transports, Session Management). `llmc session forget` ends them.

Not to be confused with a ClientSession (mcp/session.py: one JSON-RPC conversation) or a session
keeper (llmc_cli/keeper/: a process that holds servers). A remembered HTTP session lives in its
server's era cache entry (mcp.stores.EraCache), under "session".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from llmc_cli.mcp.messages import JSONObject, object_at
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.stores import Stores
from llmc_cli.mcp.versions import LEGACY_VERSIONS
from llmc_cli.model import ServerSpec, dataclass

ENTRY_KEY = "session"  # the field of an era cache entry (servers.json keeps this name)


@dataclass
class RememberedSessionId:
    id: str
    server_info: JSONObject = field(default_factory=dict)  # messages.Implementation, as the server sent it
    capabilities: JSONObject = field(default_factory=dict)  # messages.ServerCapabilities
    instructions: str | None = None

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "serverInfo": self.server_info,
            "capabilities": self.capabilities,
            "instructions": self.instructions,
        }

    @classmethod
    def from_entry(cls, entry: Mapping[str, object] | None) -> RememberedSessionId | None:
        """The session remembered in an era cache entry, if any."""
        data = entry.get(ENTRY_KEY) if isinstance(entry, Mapping) else None
        if not isinstance(data, dict) or not data.get("id"):
            return None
        instructions = data.get("instructions")
        return cls(
            str(data["id"]),
            object_at(data, "serverInfo"),
            object_at(data, "capabilities"),
            instructions if isinstance(instructions, str) else None,
        )


def entry_for(session: ClientSession) -> JSONObject:
    """The era cache entry of a legacy HTTP server after a handshake: era, version and the
    session id it gave (a server without sessions gives none)."""
    entry: JSONObject = {"era": "legacy", "transport": "http", "version": session.protocol_version or ""}
    session_id = getattr(session.transport, "session_id", None)
    if session_id:
        entry[ENTRY_KEY] = RememberedSessionId(
            session_id, session.server_info, session.capabilities, session.instructions
        ).to_json()
    return entry


def resume(session: ClientSession, version: str, remembered: RememberedSessionId) -> None:
    """Continue the HTTP session an earlier invocation left: no handshake, the server's state is
    still there. A server that ended it answers 404 on the first request, and the session starts
    a new one and says so (ClientHooks.on_notice)."""
    session.adopt("legacy", version)
    session.server_info = remembered.server_info
    session.capabilities = remembered.capabilities
    session.instructions = remembered.instructions
    session.transport.resume(remembered.id)  # type: ignore[attr-defined]


def forget(stores: Stores, keys: set[str] | None = None, known: Mapping[str, ServerSpec] | None = None) -> list[JSONObject]:
    """Drop remembered HTTP sessions (all, or those of the servers with these cache keys) and
    tell each server to end its session (DELETE; best effort, 405 means it does not let
    clients do that). `known` supplies headers and login for servers of the profile.
    Returns one row per session, its id shortened: a session id is a bearer token."""
    from llmc_cli.mcp.auth import OAuth
    from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport

    if stores.era_cache is None:
        return []
    rows: list[JSONObject] = []
    changes: dict[str, JSONObject | None] = {}
    for key, entry in sorted(stores.era_cache.load().items()):
        remembered = RememberedSessionId.from_entry(entry)
        if remembered is None or not key.startswith("remote:") or (keys is not None and key not in keys):
            continue
        spec = (known or {}).get(key)
        if spec is None:
            if not isinstance(entry.get("url"), str):
                continue  # keys are digests: without a URL there is nobody to tell
            spec = ServerSpec(name=entry["url"], url=entry["url"])
        assert spec.url
        changes[key] = {k: v for k, v in entry.items() if k != ENTRY_KEY}
        transport = StreamableHttpTransport(
            spec.url, headers=dict(spec.headers), timeout=5.0, auth=OAuth.for_spec(spec, stores.tokens)
        )
        transport.protocol_version = str(entry.get("version") or LEGACY_VERSIONS[0])
        transport.session_id = remembered.id
        transport.start(lambda message, related=None: None, lambda error: None)
        transport.close()  # sends the DELETE
        rows.append({"server": spec.name, "url": spec.shown_url(), "session": _id_hint(remembered.id), "forgotten": True})
    if changes:
        stores.era_cache.save(changes)  # one write for all of them
    return rows


def _id_hint(session_id: str) -> str:
    """Enough of a session id to tell sessions apart, too little to use one."""
    return session_id[:6] + "…" if len(session_id) > 8 else "…"

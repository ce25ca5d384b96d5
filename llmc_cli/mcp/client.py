"""Connect to a server described by a ServerSpec: choose the transport, detect the era, negotiate.

Detection follows 2026-07-28 basic/versioning.mdx and 2025-11-25 basic/transports.mdx:
- stdio: probe with `server/discover`; a DiscoverResult or a recognised modern error means modern,
  anything else (another error, silence) means legacy -> `initialize`.
- HTTP: a modern request first; a 4xx without a modern JSON-RPC error means legacy -> POST
  `initialize`; a 400/404/405 to that means the deprecated HTTP+SSE transport -> GET the stream.
What was found is cached per server in the state directory, so the next run skips the probe; a
cached answer that stops working is probed again once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from llmc_cli.config import paths
from llmc_cli.errors import ConfigError, ConnectionFailed, HttpStatusError, LlmcError, ProtocolError, RpcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.session import ClientHooks, NotADiscoverResult, Session
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS
from llmc_cli.mcp.transports.base import Transport
from llmc_cli.model import ServerSpec

STDIO_PROBE_TIMEOUT = 10.0  # a legacy server may stay silent on server/discover: fall back then
Builtins = Mapping[str, Callable[[ServerSpec], Any]]  # builtin name -> endpoint factory


def connect(spec: ServerSpec, *, hooks: ClientHooks | None = None, builtins: Builtins | None = None,
            on_stderr: Callable[[str], None] | None = None, use_cache: bool = True) -> Session:
    """An open, negotiated session; the caller closes it. Errors are LlmcErrors with exit codes."""
    cached = _load_cache().get(spec.cache_key()) if use_cache else None
    try:
        return _connect(spec, hooks, builtins, on_stderr, cached)
    except (ProtocolError, HttpStatusError):
        # What a wrong era or transport assumption looks like; a refused login, a dead server
        # or a timeout is not, and probing again would only hide the real error.
        if not cached:
            raise
    # The cached assumption failed: forget it and probe from scratch, once.
    _store_cache(spec, None)
    return _connect(spec, hooks, builtins, on_stderr, None)


def _connect(spec: ServerSpec, hooks: ClientHooks | None, builtins: Builtins | None,
             on_stderr: Callable[[str], None] | None, cached: dict[str, str] | None) -> Session:
    if spec.kind == "remote":
        return _connect_remote(spec, hooks, cached)
    if spec.kind == "builtin":
        factory = (builtins or {}).get(spec.builtin or "")
        if factory is None:
            raise ConnectionFailed(f"{spec.name}: unknown built-in server {spec.builtin!r}")
        from llmc_cli.mcp.transports.memory import MemoryTransport
        transport: Transport = MemoryTransport(factory(spec))
    else:
        from llmc_cli.mcp.transports.stdio import StdioTransport
        transport = StdioTransport(spec.command, env=dict(spec.env), cwd=spec.cwd, on_stderr=on_stderr)
    session = Session(transport, name=spec.name, timeout=spec.timeout, hooks=hooks)
    try:
        _negotiate_stdio(session, spec, cached)
    except BaseException as exc:
        session.close()
        if isinstance(exc, LlmcError):
            _add_diagnostics(exc, transport)
        raise
    return session


def _negotiate_stdio(session: Session, spec: ServerSpec, cached: dict[str, str] | None) -> None:
    if cached and cached.get("era") == "legacy":
        session.initialize()
        return
    if cached and cached.get("era") == "modern" and cached.get("version") in MODERN_VERSIONS:
        session.adopt("modern", cached["version"])
        return
    try:
        session.discover(timeout=min(spec.timeout, STDIO_PROBE_TIMEOUT))
        era = "modern"
    except RpcError as exc:
        if exc.code in jsonrpc.MODERN_ERROR_CODES:
            raise ProtocolError(f"{spec.name}: server speaks only MCP versions llmc does not: {exc.data}") from None
        session.initialize()
        era = "legacy"
    except (TimeoutExpired, NotADiscoverResult):
        # Silence or a reply that is no DiscoverResult: a legacy server (transports/stdio.mdx)...
        try:
            session.initialize()
            era = "legacy"
        except RpcError as exc:
            if exc.code not in jsonrpc.MODERN_ERROR_CODES:
                raise
            # ...or a modern one that was slow to start (a loaded machine): it took the probe,
            # so it refuses the handshake with a modern error. Ask again, with the whole timeout.
            session.discover(timeout=spec.timeout)
            era = "modern"
    _store_cache(spec, {"era": era, "version": session.protocol_version or ""})


def _connect_remote(spec: ServerSpec, hooks: ClientHooks | None, cached: dict[str, str] | None) -> Session:
    from llmc_cli.mcp.auth import OAuth
    from llmc_cli.mcp.transports.legacy_sse import LegacySseTransport
    from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport

    assert spec.url
    headers = dict(spec.headers)
    auth = OAuth.for_spec(spec)
    choice = spec.transport
    if choice == "auto" and cached:
        choice = cached.get("transport", "auto")
    if choice == "sse":
        session = Session(LegacySseTransport(spec.url, headers=headers, timeout=spec.timeout, auth=auth),
                          name=spec.name, timeout=spec.timeout, hooks=hooks)
        _guarded(session, session.initialize)
        _store_cache(spec, {"era": "legacy", "transport": "sse", "version": session.protocol_version or ""})
        return session

    transport = StreamableHttpTransport(spec.url, headers=headers, timeout=spec.timeout, auth=auth)
    session = Session(transport, name=spec.name, timeout=spec.timeout, hooks=hooks)
    # A legacy session outlives this process: its id is remembered after every handshake (the
    # one after a 404 included) and the server is not told to end it on close.
    transport.end_session_on_close = False
    session.on_initialized = lambda: _remember_http_session(spec, session)
    if cached and cached.get("era") == "legacy" and choice == "http":
        remembered = cached.get("session")
        if isinstance(remembered, dict) and remembered.get("id") and cached.get("version") in LEGACY_VERSIONS:
            _resume(session, cached["version"], remembered)
        else:
            _guarded(session, session.initialize)
        return session
    if cached and cached.get("era") == "modern" and cached.get("version") in MODERN_VERSIONS:
        session.adopt("modern", cached["version"])
        return session
    try:
        session.discover()
        era = "modern"
    except RpcError as exc:
        if exc.code in jsonrpc.MODERN_ERROR_CODES:
            session.close()
            raise ProtocolError(f"{spec.name}: server speaks only MCP versions llmc does not: {exc.data}") from None
        era = "legacy"
    except HttpStatusError as exc:
        if not 400 <= exc.status < 500 or exc.status in (401, 403):
            session.close()
            raise
        era = "legacy"
    except NotADiscoverResult:
        era = "legacy"
    except BaseException:
        session.close()
        raise
    if era == "legacy":
        try:
            session.initialize()
        except HttpStatusError as exc:
            session.close()
            if spec.transport == "http" or exc.status not in (400, 404, 405):
                raise
            # The deprecated HTTP+SSE transport of 2024-11-05 answers POSTs like this.
            return _connect_remote(ServerSpec(**{**_spec_fields(spec), "transport": "sse"}), hooks, None)
        except BaseException:
            session.close()
            raise
    if era == "legacy":
        _remember_http_session(spec, session)
    else:
        _store_cache(spec, {"era": era, "transport": "http", "version": session.protocol_version or ""})
    return session


def _resume(session: Session, version: str, remembered: dict[str, Any]) -> None:
    """Continue the HTTP session an earlier invocation left: no handshake, the server's state
    (handles, processes) is still there. A server that ended it answers 404 on the first
    request, and the session starts a new one and says so (ClientHooks.on_notice)."""
    session.adopt("legacy", version)
    session.server_info = remembered.get("serverInfo") or {}
    session.capabilities = remembered.get("capabilities") or {}
    session.instructions = remembered.get("instructions")
    session.transport.resume(str(remembered["id"]))  # type: ignore[attr-defined]


def _remember_http_session(spec: ServerSpec, session: Session) -> None:
    session_id = getattr(session.transport, "session_id", None)
    entry: dict[str, Any] = {"era": "legacy", "transport": "http", "version": session.protocol_version or ""}
    if session_id:
        entry["session"] = {"id": session_id, "serverInfo": session.server_info,
                            "capabilities": session.capabilities, "instructions": session.instructions}
    _store_cache(spec, entry)


def forget_http_sessions(keys: set[str] | None = None,
                         known: Mapping[str, ServerSpec] | None = None) -> list[dict[str, Any]]:
    """Drop remembered HTTP sessions (all, or those of the servers with these cache keys) and
    tell each server to end its session (DELETE; best effort, 405 means it does not let
    clients do that). `known` supplies headers and login for servers of the profile.
    Returns one row per session, its id shortened: a session id is a bearer token."""
    from llmc_cli.mcp.auth import OAuth
    from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport

    rows, forgotten = [], set()
    for key, entry in sorted(_load_cache().items()):
        remembered = entry.get("session")
        if not isinstance(remembered, dict) or not key.startswith("remote:") or (keys is not None and key not in keys):
            continue
        spec = (known or {}).get(key)
        if spec is None:
            if not isinstance(entry.get("url"), str):
                continue
            spec = ServerSpec(name=entry["url"], url=entry["url"])
        assert spec.url
        transport = StreamableHttpTransport(spec.url, headers=dict(spec.headers), timeout=5.0, auth=OAuth.for_spec(spec))
        transport.protocol_version = str(entry.get("version") or LEGACY_VERSIONS[0])
        transport.session_id = str(remembered.get("id"))
        transport.start(lambda message: None, lambda error: None)
        transport.close()  # sends the DELETE
        forgotten.add(key)
        rows.append({"server": spec.name, "url": spec.shown_url(), "session": _id_hint(str(remembered.get("id"))),
                     "forgotten": True})
    if forgotten:
        def drop_sessions(cache: dict[str, dict[str, Any]]) -> None:
            for key in forgotten & set(cache):
                cache[key] = {k: v for k, v in cache[key].items() if k != "session"}
        _update_cache(drop_sessions)
    return rows


def _id_hint(session_id: str) -> str:
    """Enough of a session id to tell sessions apart, too little to use one."""
    return session_id[:6] + "…" if len(session_id) > 8 else "…"


def _guarded(session: Session, step: Callable[[], Any]) -> None:
    try:
        step()
    except BaseException:
        session.close()
        raise


def _spec_fields(spec: ServerSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in spec.__dataclass_fields__}


def _add_diagnostics(exc: LlmcError, transport: Transport) -> None:
    tail = transport.diagnostics().strip().splitlines()
    if tail and "stderr" not in exc.details:
        exc.details["stderr"] = tail[-10:]


# -- era cache ------------------------------------------------------------------------------------
# servers.json: {ServerSpec.cache_key(): {"era", "version", "transport"?, "url"?, "session"?}}.
# Keys are digests (a URL's query may hold an expanded ${SECRET}); "url" is the URL without
# userinfo and query, for `session forget` to name and reach a server no profile describes.

_KEY = re.compile(r"(stdio|remote):[0-9a-f]{32}|builtin:.+")


def _cache_path() -> Path:
    return paths.state_dir() / "servers.json"


def _load_cache() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_cache_path().read_bytes())
    except (OSError, ValueError, RecursionError):  # not there, not JSON, not UTF-8, nested too deep
        return {}
    if not isinstance(data, dict):
        return {}
    # Entries written under keys of another form (older llmc: the URL itself) are dropped.
    return {k: v for k, v in data.items() if _KEY.fullmatch(k) and isinstance(v, dict)}


def _store_cache(spec: ServerSpec, entry: dict[str, Any] | None) -> None:
    """Best effort: a cache that cannot be written only costs a probe next time."""
    key = spec.cache_key()
    if entry is not None and spec.url:
        entry = {**entry, "url": spec.shown_url()}
    if _load_cache().get(key) == entry:
        return  # the common case: nothing new, no lock taken
    _update_cache(lambda cache: cache.pop(key, None) if entry is None else cache.__setitem__(key, entry))


def _update_cache(mutate: Callable[[dict[str, dict[str, Any]]], Any]) -> None:
    """Read, change and write servers.json under its lock (concurrent llmc processes keep each
    other's entries); failures are ignored, it is a cache."""
    from llmc_cli.config import files

    try:
        with files.locked(_cache_path()):
            cache = _load_cache()
            mutate(cache)
            files.write_atomic(_cache_path(), json.dumps(cache, indent=1, sort_keys=True), durable=False)
    except ConfigError:
        pass


__all__ = ["connect", "ClientHooks", "Session", "LEGACY_VERSIONS", "MODERN_VERSIONS"]

"""Connect to a server described by a ServerSpec: choose the transport, detect the era, negotiate.

Detection follows 2026-07-28 basic/versioning.mdx and 2025-11-25 basic/transports.mdx:
- stdio: probe with `server/discover`; a DiscoverResult or a recognised modern error means modern,
  anything else (another error, silence) means legacy -> `initialize`.
- HTTP: a modern request first; a 4xx without a modern JSON-RPC error means legacy -> POST
  `initialize`; a 400/404/405 to that means the deprecated HTTP+SSE transport -> GET the stream.
What was found is cached per server in the era cache the caller hands in (mcp.stores; the CLI's
is servers.json in the state directory), so the next run skips the probe; a cached answer that
stops working is probed again once.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from llmc_cli.errors import ConnectionFailed, HttpStatusError, LlmcError, ProtocolError, RpcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc, session_ids, transports
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.session import ClientSession, NotADiscoverResult
from llmc_cli.mcp.stores import Stores
from llmc_cli.mcp.transports.base import Transport
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS, SUPPORTED_VERSIONS, supported_versions
from llmc_cli.model import SandboxSpec, ServerSpec

if TYPE_CHECKING:
    from llmc_cli.mcp.stores import EraCache
    from llmc_cli.mcp.transports.memory import Endpoint
    from llmc_cli.mcp.transports.stdio import StdioTransport
    from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport

    Builtins = Mapping[str, Callable[[ServerSpec], Endpoint]]  # builtin name -> endpoint factory

STDIO_PROBE_TIMEOUT = 10.0  # a legacy server may stay silent on server/discover: fall back then
# How long a stdio server seen to outlive the wait after its input closed is believed to do so
# again (its era cache entry's "lingers", the time it was seen); then it gets the wait once more.
LINGER_BELIEVED_SECONDS = 24 * 3600.0


def connect(
    spec: ServerSpec,
    *,
    stores: Stores | None = None,
    hooks: ClientHooks | None = None,
    builtins: Builtins | None = None,
    on_stderr: Callable[[str], None] | None = None,
    started: StdioTransport | None = None,
) -> ClientSession:
    """An open, negotiated session; the caller closes it. Errors are LlmcErrors with exit codes.
    `stores`: where the era cache and OAuth tokens live (none: probe every time, tokens in memory).
    `started`: a stdio server's transport whose process was started already, for this very spec
    (its command, launch, environment and working directory): adopted instead of a new one."""
    stores = stores or Stores()
    memo = _Memo(stores.era_cache, spec)
    cached = memo.get()
    if started is not None:
        _check_adopted(started, spec)
    try:
        return _connect(spec, stores, memo, hooks, builtins, on_stderr, cached, started)
    except (ProtocolError, HttpStatusError):
        # What a wrong era or transport assumption looks like; a refused login, a dead server
        # or a timeout is not, and probing again would only hide the real error.
        if not cached:
            raise
    # The cached assumption failed: forget it and probe from scratch, once.
    memo.put(None)
    return _connect(spec, stores, memo, hooks, builtins, on_stderr, None)


class _Memo:
    """One server's entry of the era cache (if there is a cache). Keys are digests (a URL's query
    may hold an expanded ${SECRET}); a remote server's entry keeps its URL without userinfo and
    query, for `session forget` to name and reach a server no profile describes."""

    def __init__(self, cache: EraCache | None, spec: ServerSpec) -> None:
        self.cache, self.key, self.url = cache, spec.cache_key(), spec.shown_url() if spec.url else None

    def get(self) -> dict[str, Any] | None:
        return self.cache.load().get(self.key) if self.cache is not None else None

    def lingered(self) -> None:
        """The server did not exit within the wait after its input closed (now)."""
        entry = self.get()
        if entry is not None:  # an entry is made by the handshake, before any close
            self.put({**entry, "lingers": int(time.time())})

    def put(self, entry: dict[str, Any] | None) -> None:
        if self.cache is None:
            return
        if entry is not None and self.url:
            entry = {**entry, "url": self.url}
        self.cache.save({self.key: entry})


def _connect(
    spec: ServerSpec,
    stores: Stores,
    memo: _Memo,
    hooks: ClientHooks | None,
    builtins: Builtins | None,
    on_stderr: Callable[[str], None] | None,
    cached: dict[str, Any] | None,
    started: StdioTransport | None = None,
) -> ClientSession:
    if spec.kind == "remote":
        return _connect_remote(spec, stores, memo, hooks, cached)
    if spec.kind == "builtin":
        factory = (builtins or {}).get(spec.builtin or "")
        if factory is None:
            raise ConnectionFailed(f"{spec.name}: unknown built-in server {spec.builtin!r}")
        transport: Transport = transports.MemoryTransport(factory(spec))  # the transports' lazy names
    elif started is not None:
        transport = started
        transport.on_stderr = on_stderr  # read from start() on: no line of it was read before
        _judge_eof(started, memo, cached)
    else:
        stdio = transports.StdioTransport(spec.command, env=dict(spec.env), cwd=spec.cwd, on_stderr=on_stderr, launch=spec.launch)
        _judge_eof(stdio, memo, cached)
        transport = stdio
        if spec.launch and spec.sandbox is not None and hooks is not None:
            hooks = sandboxed_roots(hooks, spec.sandbox)
    session = ClientSession(transport, name=spec.name, timeout=spec.timeout, hooks=hooks)
    session.handshake_timeout = spec.handshake_timeout
    try:
        _negotiate_stdio(session, spec, memo, cached)
    except BaseException as exc:
        session.close()
        if isinstance(exc, LlmcError):
            _add_diagnostics(exc, transport)
        raise
    return session


def _judge_eof(transport: StdioTransport, memo: _Memo, cached: dict[str, Any] | None) -> None:
    """A server that outlived the wait after its input closed, the last time (within
    LINGER_BELIEVED_SECONDS), is not waited for again: its close sends SIGTERM as soon as its
    input is closed. Any other is waited for, and remembered when it lets the wait pass. (The
    spec's shutdown waits "a reasonable time" before terminating: for a server that does not
    exit on EOF, none is; server-everything, like many Node servers, keeps running on EOF.)"""
    seen = cached.get("lingers") if cached else None
    now = time.time()
    # Compared, not subtracted: servers.json is a file anyone may have edited, and an int too
    # large for a float (JSON has no limit) cannot be subtracted from one; NaN compares False.
    if isinstance(seen, (int, float)) and not isinstance(seen, bool) and now - LINGER_BELIEVED_SECONDS < seen <= now:
        transport.eof_grace = 0.0
    else:
        transport.on_linger = memo.lingered


def _check_adopted(started: StdioTransport, spec: ServerSpec) -> None:
    """A started process runs exactly what this spec says (command, sandbox launch, environment,
    working directory), or it is not this server's: a caller's mistake, never adopted."""
    runs = (started.command, started.launch, started.env, started.cwd)
    if spec.kind != "stdio" or runs != (list(spec.command), list(spec.launch), dict(spec.env), spec.cwd):
        started.close()
        raise ValueError(f"{spec.name}: the process started early is not the one its spec describes")


def sandboxed_roots(hooks: ClientHooks, sandbox: SandboxSpec) -> ClientHooks:
    """The hooks with roots/list answered as a sandboxed server sees the file system: its
    declared paths are bound at the same paths, so a root inside one is kept as it is, a root
    that holds declared paths becomes those paths, and every other root is left out (the server
    could not reach it; naming it would only tell where the user's files are)."""

    declared = [*sandbox.read_paths, *sandbox.write_paths]

    def visible(roots: list[JSONObject]) -> list[JSONObject]:
        out: list[JSONObject] = []
        for root in roots:
            uri = root.get("uri") if isinstance(root, dict) else None
            parts = urlsplit(uri) if isinstance(uri, str) else None
            if parts is None or parts.scheme != "file" or parts.netloc not in ("", "localhost"):
                continue
            path = os.path.normpath(unquote(parts.path))
            if sandbox.visible(path):
                out.append(root)
                continue
            for inner in declared:
                if inner.startswith(path.rstrip("/") + "/"):
                    out.append({**root, "uri": "file://" + quote(inner)})
        return out

    listed = hooks.list_roots
    return replace(hooks, roots=visible(hooks.roots), list_roots=(lambda: visible(listed())) if listed else None)


def _negotiate_stdio(session: ClientSession, spec: ServerSpec, memo: _Memo, cached: dict[str, Any] | None) -> None:
    if cached and cached.get("era") == "legacy":
        session.initialize()
        return
    if cached and cached.get("era") == "modern" and cached.get("version") in MODERN_VERSIONS:
        session.adopt("modern", cached["version"])
        return
    # The whole connect is bounded by the handshake timeout, however many steps it takes: the
    # probe gets at most half of it, each later step what is left.
    bound = spec.handshake_timeout
    deadline = time.monotonic() + bound
    try:
        session.discover(timeout=min(bound / 2, STDIO_PROBE_TIMEOUT))
        era = "modern"
    except RpcError as exc:
        _left(session, deadline, bound)
        session.initialize(_refused(spec, exc) if exc.code in jsonrpc.MODERN_ERROR_CODES else LEGACY_VERSIONS[0])
        era = "legacy"
    except (TimeoutExpired, NotADiscoverResult):
        # Silence or a reply that is no DiscoverResult: a legacy server (transports/stdio.mdx)...
        try:
            _left(session, deadline, bound)
            session.initialize()
            era = "legacy"
        except RpcError as exc:
            if exc.code not in jsonrpc.MODERN_ERROR_CODES:
                raise
            # ...or a modern one that was slow to start (a loaded machine): it took the probe,
            # so it refuses the handshake with a modern error. Ask again, with what time is left.
            _left(session, deadline, bound)
            session.discover()
            era = "modern"
        except TimeoutExpired:
            raise TimeoutExpired(f"{spec.name}: no answer to the handshake within {bound:g}s (the connect timeout)") from None
    finally:
        session.handshake_timeout = bound
    memo.put({"era": era, "version": session.protocol_version or ""})


def _left(session: ClientSession, deadline: float, bound: float) -> None:
    """The next handshake step may wait what is left of the connect timeout."""
    left = deadline - time.monotonic()
    if left <= 0.01:
        raise TimeoutExpired(f"{session.name}: no answer to the handshake within {bound:g}s (the connect timeout)")
    session.handshake_timeout = left


def _connect_remote(
    spec: ServerSpec, stores: Stores, memo: _Memo, hooks: ClientHooks | None, cached: dict[str, Any] | None
) -> ClientSession:
    from llmc_cli.mcp.auth import OAuth
    from llmc_cli.mcp.transports.legacy_sse import LegacySseTransport
    from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport

    assert spec.url
    headers = dict(spec.headers)
    auth = OAuth.for_spec(spec, stores.tokens)
    choice = spec.transport
    if choice == "auto" and cached:
        choice = cached.get("transport", "auto")
    if choice == "sse":
        session = ClientSession(
            LegacySseTransport(spec.url, headers=headers, timeout=spec.timeout, auth=auth),
            name=spec.name,
            timeout=spec.timeout,
            hooks=hooks,
        )
        session.handshake_timeout = spec.handshake_timeout
        _guarded(session, session.initialize)
        memo.put({"era": "legacy", "transport": "sse", "version": session.protocol_version or ""})
        return session
    return _connect_http(
        spec,
        StreamableHttpTransport(spec.url, headers=headers, timeout=spec.timeout, auth=auth),
        stores,
        memo,
        hooks,
        cached,
        choice,
    )


def _connect_http(
    spec: ServerSpec,
    transport: StreamableHttpTransport,
    stores: Stores,
    memo: _Memo,
    hooks: ClientHooks | None,
    cached: dict[str, Any] | None,
    choice: str,
) -> ClientSession:
    """Streamable HTTP: the era the cache remembers, else a discover probe, else a legacy handshake
    (and, when the server answers that like the 2024-11-05 transport, that transport)."""

    session = ClientSession(transport, name=spec.name, timeout=spec.timeout, hooks=hooks)
    session.handshake_timeout = spec.handshake_timeout
    # A legacy session outlives this process: its id is remembered after every handshake (the
    # one after a 404 included) and the server is not told to end it on close.
    remember = stores.remember_session_ids
    transport.end_session_on_close = not remember
    session.on_initialized = lambda: _note_legacy(memo, session, remember)
    if cached and cached.get("era") == "legacy" and choice == "http":
        remembered = session_ids.RememberedSessionId.from_entry(cached) if remember else None
        if remembered and cached.get("version") in LEGACY_VERSIONS:
            session_ids.resume(session, cached["version"], remembered)
        else:
            _guarded(session, session.initialize)
        return session
    if cached and cached.get("era") == "modern" and cached.get("version") in MODERN_VERSIONS:
        session.adopt("modern", cached["version"])
        return session
    era, legacy_version = _probe_era(spec, session)
    if era == "modern":
        memo.put({"era": era, "transport": "http", "version": session.protocol_version or ""})
        return session
    try:
        session.initialize(legacy_version)
    except HttpStatusError as exc:
        session.close()
        if spec.transport == "http" or exc.status not in (400, 404, 405):
            raise
        # The deprecated HTTP+SSE transport of 2024-11-05 answers POSTs like this.
        return _connect_remote(dataclasses.replace(spec, transport="sse"), stores, memo, hooks, None)
    except BaseException:
        session.close()
        raise
    _note_legacy(memo, session, remember)
    return session


def _probe_era(spec: ServerSpec, session: ClientSession) -> tuple[str, str]:
    """("modern", _) when the server answers server/discover; else ("legacy", the version to
    offer in the handshake). The session is closed when the probe fails for good."""
    legacy_version = LEGACY_VERSIONS[0]
    try:
        session.discover()
        return "modern", legacy_version
    except RpcError as exc:
        if exc.code in jsonrpc.MODERN_ERROR_CODES:
            try:
                legacy_version = _refused(spec, exc)
            except ProtocolError:
                session.close()
                raise
    except HttpStatusError as exc:
        if not 400 <= exc.status < 500 or exc.status in (401, 403):
            session.close()
            raise
    except NotADiscoverResult:
        pass
    except BaseException:
        session.close()
        raise
    return "legacy", legacy_version


def _note_legacy(memo: _Memo, session: ClientSession, remember: bool) -> None:
    """Cache the era (and session id) after a legacy HTTP handshake; a session that is not
    remembered writes nothing, so it cannot replace the entry of one that is."""
    if remember:
        memo.put(session_ids.entry_for(session))


def _refused(spec: ServerSpec, exc: RpcError) -> str:
    """A modern error in answer to the era probe (after the session's one version retry). An
    UnsupportedProtocolVersion listing initialize-era versions llmc speaks: the best of them,
    for the handshake. Otherwise a ProtocolError that says what happened."""
    offered = supported_versions(exc)
    legacy = next((v for v in LEGACY_VERSIONS if v in offered), None)
    if legacy:
        return legacy
    if exc.code != jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
        raise ProtocolError(exc.message)
    if any(v in offered for v in MODERN_VERSIONS):
        requested = exc.data.get("requested") if isinstance(exc.data, dict) else None
        raise ProtocolError(
            f"{spec.name}: the server refused MCP {requested or 'its own version'} again after a "
            f"retry, though it lists it as supported ({', '.join(offered)})"
        )
    raise ProtocolError(
        f"{spec.name}: no common MCP version: the server speaks {', '.join(offered) or 'none it names'}; "
        f"llmc speaks {', '.join(SUPPORTED_VERSIONS)}"
    )


def _guarded(session: ClientSession, step: Callable[[], object]) -> None:
    try:
        step()
    except BaseException:
        session.close()
        raise


def _add_diagnostics(exc: LlmcError, transport: Transport) -> None:
    tail = transport.diagnostics().strip().splitlines()
    if tail and "stderr" not in exc.details:
        exc.details["stderr"] = tail[-10:]


__all__ = ["connect", "ClientHooks", "ClientSession", "LEGACY_VERSIONS", "MODERN_VERSIONS"]

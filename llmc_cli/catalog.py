"""Many servers, one toolbox: sessions opened concurrently and lazily, tools namespaced by server,
bare tool names routed when unambiguous. A dead server never blocks the others."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from llmc_cli import interrupts
from llmc_cli.errors import ConnectionFailed, LlmcError, RpcError, UsageError, did_you_mean
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import Session
from llmc_cli.mcp.stores import Stores
from llmc_cli.model import ServerSpec, Tool

if TYPE_CHECKING:
    from concurrent.futures import Future


@dataclass
class ServerFailure:
    server: str
    error: LlmcError

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, **self.error.to_json()}


class Catalog:
    def _stderr_of(self, server: str) -> Callable[[str], None] | None:
        """The stderr handler for one server's process lines (None: the lines go nowhere)."""
        on_stderr = self.on_stderr
        if on_stderr is None:
            return None
        return lambda line: on_stderr(server, line)

    def __init__(self, specs: list[ServerSpec], *, hooks: ClientHooks | None = None,
                 builtins: Mapping[str, Callable[[ServerSpec], Any]] | None = None,
                 on_stderr: Callable[[str, str], None] | None = None,
                 keeper: tuple[str, str] | None = None, stores: Stores | None = None,
                 unusable: Mapping[str, LlmcError] | None = None, shared: Catalog | None = None,
                 own: Collection[str] | None = None,
                 admit: Callable[[str], AbstractContextManager[None]] | None = None) -> None:
        """`unusable`: servers that cannot even be configured (an unset ${VAR}), each with its
        error. They stay in the catalog, failed from the start: every listing reports them as
        failures, with their own exit code, beside the others' results. `shared`, `own` and
        `admit`: see for_host()."""
        names = [s.name for s in specs] + list(unusable or {})
        if len(set(names)) != len(names):
            raise UsageError(f"duplicate server name among {names}")
        self.specs = {s.name: s for s in specs}
        self.specs.update({name: ServerSpec(name=name) for name in unusable or {}})  # never connected
        self.hooks = hooks
        self.builtins = builtins
        self.on_stderr = on_stderr
        self.keeper = keeper  # (socket path, session name): the servers live in a session keeper
        self.stores = stores  # era cache and OAuth tokens for connect()
        self._sessions: dict[str, Session] = {}
        self.connect_seconds: dict[str, float] = {}  # how long each connection took to open (ping shows it)
        self._failed: dict[str, LlmcError] = dict(unusable or {})  # a server that failed to connect is not retried
        self._unusable = set(unusable or {})  # ...and one that cannot be configured never is
        self._tools: dict[str, list[Tool]] = {}
        # Servers that announced notifications/tools/list_changed since the result cache last
        # looked (services/caching.py drops their cached results), kept by the root catalog.
        self.tools_changed: set[str] = set()
        self._locks = {name: threading.Lock() for name in self.specs}
        self._closed = False
        self.shared = shared
        self.own = None if own is None else frozenset(own)
        self.admit = admit
        # Every call comes on a thread of its own that only waits for it (the gateway's host
        # connections): an HTTP server's requests are then posted on that thread.
        self.posts_on_caller_thread: bool = shared.posts_on_caller_thread if shared is not None else False
        # Told how work across servers (each) goes: (servers in all, servers still waited for),
        # once at the start, as each server settles, and with none waited for at the end.
        self.on_each: Callable[[int, list[str]], None] | None = None

    def for_host(self, hooks: ClientHooks | None = None, own: Collection[str] | None = None,
                 admit: Callable[[str], AbstractContextManager[None]] | None = None) -> Catalog:
        """For a long-lived caller with many users (the gateway's hosts): a catalog for one of
        them, with its own connections to the servers that keep state between requests (a
        process, an initialize-era session) and this catalog's connections to the others. So a
        process or session one user started is never another's. `own`: the only servers it
        connects to itself (None: every one that keeps state); `admit(server)`: a context each
        connection of its own starts in (raises to refuse it: a cap that counts it meanwhile). Its connections start
        on first use, are never remembered for later runs, and end when it is closed; tool
        listings come from the root catalog (they are the server's, not the connection's)."""
        if self.keeper:
            return self  # the servers live in a session keeper, shared by design
        stores = replace(self.stores or Stores(), remember_sessions=False)
        specs = [spec for name, spec in self.specs.items() if name not in self._unusable]
        return Catalog(specs, hooks=hooks, builtins=self.builtins, on_stderr=self.on_stderr, stores=stores,
                       unusable={name: self._failed[name] for name in self._unusable}, shared=self, own=own,
                       admit=admit)

    def root(self) -> Catalog:
        """The catalog every for_host() one descends from: the connections shared by all."""
        catalog = self
        while catalog.shared is not None:
            catalog = catalog.shared
        return catalog

    def stateless(self, server: str) -> bool:
        """Whether one connection to the server can serve every user: a remote server of the
        2026-07-28 era, or a Streamable HTTP one of the initialize era that gave no session id.
        A process (stdio, built-in) and a session keep what one user did. Connects to know."""
        if self.specs[server].kind != "remote":
            return False
        session = self.session(server)
        return session.era == "modern" or getattr(session.transport, "session_id", "") is None

    def serving(self, server: str) -> Catalog:
        """The catalog whose connection serves this server: the root's for a stateless server,
        the one it descends from for a server not its own."""
        if self.shared is None:
            return self
        if self.own is not None and server not in self.own:
            return self.shared.serving(server)
        root = self.root()
        return root if root.stateless(server) else self

    def held(self) -> int:
        """How many connections of its own are open (processes, upstream sessions)."""
        return sum(1 for session in list(self._sessions.values()) if session.closed_error is None)

    def busy(self) -> bool:
        """Whether a request is waiting on one of its own connections."""
        return any(session.busy() for session in list(self._sessions.values()))

    def release(self) -> None:
        """Close its own connections and stay usable: the next use starts them again (what
        they kept is lost). For a caller that reclaims idle ones; a server being connected at
        this moment is left alone (its lock is not waited for: callers may hold another's)."""
        for server in list(self._sessions):
            if not self._locks[server].acquire(blocking=False):
                continue
            try:
                session = self._sessions.pop(server, None)
                self._tools.pop(server, None)
            finally:
                self._locks[server].release()
            if session is not None:
                session.close()

    def session(self, server: str) -> Session:
        """The server's session, connecting on first use (one connection per server)."""
        if server not in self.specs:
            raise UsageError(f"unknown server {server!r}{did_you_mean(server, self.specs)} "
                             f"(servers: {', '.join(self.specs) or 'none'})")
        if self.shared is not None and (serving := self.serving(server)) is not self:
            return serving.session(server)
        with self._locks[server]:
            if server in self._failed:
                raise self._failed[server]
            if self._closed:
                # A thread still working after the command ended (interrupted) must not start
                # a server nobody will stop.
                raise ConnectionFailed(f"{server}: the command is ending; no new connection")
            if server not in self._sessions:
                spec = self.specs[server]
                stderr = self._stderr_of(server)
                hooks = replace(self.hooks or ClientHooks(), on_list_changed=partial(self._changed, server))
                # a refusal is no failure of the server: raised on entering, not kept in _failed
                with self.admit(server) if self.admit is not None else contextlib.nullcontext():
                    self._connect(server, spec, hooks, stderr)
            return self._sessions[server]

    def _connect(self, server: str, spec: ServerSpec, hooks: ClientHooks, stderr: Callable[[str], None] | None) -> None:
        """Open the server's session into _sessions (its lock held); a failure is kept in _failed."""
        started = time.monotonic()
        try:
            if self.keeper:
                from llmc_cli.keeper.transport import attach

                path, session_name = self.keeper
                self._sessions[server] = attach(path, session_name, server, timeout=spec.timeout, hooks=hooks)
            else:
                from llmc_cli.mcp.client import connect  # not for a keeper's servers

                session = connect(spec, stores=self.stores, hooks=hooks, builtins=self.builtins,
                                  on_stderr=stderr)
                if self.posts_on_caller_thread and hasattr(session.transport, "posts_on_caller_thread"):
                    session.transport.posts_on_caller_thread = True
                self._sessions[server] = session
            self.connect_seconds[server] = time.monotonic() - started
        except LlmcError as exc:
            self._failed[server] = exc
            raise

    def add_servers(self, specs: list[ServerSpec]) -> None:
        """Servers learnt after the catalog was made (a keeper lists what it holds when the first
        one attaches). A spec for a server already here replaces that spec, not its session."""
        for spec in specs:
            self.specs[spec.name] = spec
            self._locks.setdefault(spec.name, threading.Lock())

    def working_directory(self, server: str) -> str | None:
        """Where the server resolves relative paths, when llmc knows it (the policy judges
        relative path arguments there). A stdio server runs in its `cwd`, relative to llmc's;
        without one it inherits llmc's (the stdio transport passes no other). The built-in
        workspace starts relative paths at its first root. None for a remote server, and for a
        server a session keeper runs with a relative or no `cwd` (it started wherever the keeper
        was started)."""
        import os

        spec = self.specs.get(server)
        if spec is None or spec.kind == "remote":
            return None
        if spec.kind == "builtin":
            if spec.builtin != "workspace":
                return None
            roots = spec.options.get("roots") or ["."]
            base = os.path.expanduser(roots[0]) if isinstance(roots[0], str) and roots[0] else "."
        else:
            base = spec.cwd or "."
        if self.keeper and not os.path.isabs(base):
            return None
        # Joined, not normalised: the policy resolves it as the kernel does (`link/..` included).
        return os.getcwd() if base == "." else os.path.join(os.getcwd(), base)

    def restart(self, server: str) -> bool:
        """For a long-lived caller (the gateway): forget a server whose connection ended, or whose
        start failed, so that the next use starts it again. True when there was one to forget.
        What the old process or session kept (handles, memory) is lost."""
        if server not in self.specs or server in self._unusable:
            return False
        with self._locks[server]:
            session = self._sessions.get(server)
            if session is not None and session.closed_error is not None:
                del self._sessions[server]
                self._tools.pop(server, None)
                session.close()
                return True
            return self._failed.pop(server, None) is not None

    def _changed(self, server: str, method: str) -> None:
        """notifications/tools/list_changed: the next listing asks the server again."""
        if method == "notifications/tools/list_changed":
            self._tools.pop(server, None)
            root = self.root()
            root._tools.pop(server, None)  # the listing is the server's, kept by the root for every host
            root.tools_changed.add(server)
        if self.hooks and self.hooks.on_list_changed:
            self.hooks.on_list_changed(method)

    def warm_up(self, servers: list[str] | None = None) -> None:
        """Start connecting every server (or these) in the background, so server start-up
        overlaps with whatever the command does next (loading the profile, the policy)."""
        for name in servers if servers is not None else self.specs:
            threading.Thread(target=self._connect_quietly, args=(name,), daemon=True,
                             name=f"llmc-connect-{name}").start()

    def _connect_quietly(self, server: str) -> None:
        try:
            self.session(server)
        except LlmcError:
            pass  # kept in self._failed; reported when the command uses the server

    def tools_of(self, server: str) -> list[Tool]:
        if self.shared is not None:
            return self.shared.tools_of(server)
        if server not in self._tools:
            raw = self.session(server).list_tools()
            self._tools[server] = [Tool.from_mcp(server, t) for t in raw]
        return self._tools[server]

    def each(self, work: Callable[[str], Any], servers: list[str] | None = None) -> tuple[dict[str, Any], list[ServerFailure]]:
        """Run work(server) for every server concurrently; failures are collected, not raised."""
        from concurrent.futures import ThreadPoolExecutor  # not at import: a call to one server needs no pool

        names = servers or list(self.specs)
        results: dict[str, Any] = {}
        failures: list[ServerFailure] = []
        report = _Progress(names, self.on_each)
        pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(names))))
        try:
            futures = {name: pool.submit(work, name) for name in names}
            for name, future in futures.items():
                future.add_done_callback(partial(report.settled, name))
            for name, future in futures.items():
                interrupts.wait(partial(_settled, future))
                try:
                    results[name] = future.result()
                except LlmcError as exc:
                    failures.append(ServerFailure(name, exc))
        finally:
            # Not joined: when an interruption leaves the loop early, a worker may still wait for
            # a silent server, and joining it here would hold the signal up for that request's
            # whole timeout. Its request ends when the command closes the catalog while unwinding.
            pool.shutdown(wait=False, cancel_futures=True)
            report.end()
        return results, failures

    def list_tools(self, servers: list[str] | None = None) -> tuple[list[Tool], list[ServerFailure]]:
        per_server, failures = self.each(self.tools_of, servers)
        return [t for name in (servers or self.specs) for t in per_server.get(name, [])], failures

    def list_offered(self, method: str, key: str, capability: str, servers: list[str] | None = None
                     ) -> tuple[dict[str, list[dict[str, Any]]], list[str], list[ServerFailure]]:
        """Every page of `method` from each server (or each of `servers`) that offers `capability`
        (resources, prompts): (items per server, servers skipped as not offering it, failures). A server
        whose declared capabilities lack it is not asked; one whose capabilities are unknown
        here (a session resumed from the era cache) is asked, and "method not found" skips it."""

        def gather(server: str) -> list[dict[str, Any]] | None:
            session = self.session(server)
            if session.capabilities and capability not in session.capabilities:
                return None
            try:
                return session.list_all(method, key)
            except RpcError as exc:
                if exc.code != jsonrpc.METHOD_NOT_FOUND:
                    raise
                return None

        results, failures = self.each(gather, servers)
        skipped = [server for server, items in results.items() if items is None]
        return {server: items for server, items in results.items() if items is not None}, skipped, failures

    def resolve(self, name: str, known: Mapping[str, Collection[str]] | None = None) -> tuple[str, str]:
        """'server.tool' -> (server, tool), starting no server; a bare name when exactly one
        server has that tool. `known`: tool names per server from an earlier listing (a cache
        handed in from above). Only the servers the cache names as owners, or knows nothing
        about, are asked; all of them only when those do not have the tool (a stale cache)."""
        server, dot, tool = name.partition(".")
        if dot and server in self.specs:
            return server, tool
        if len(self.specs) == 1:
            return next(iter(self.specs)), name
        known = known or {}
        candidates = [s for s in self.specs if s not in known or name in known[s]]
        tools, failures = self.list_tools(candidates) if candidates else ([], [])
        owners = [t.server for t in tools if t.name == name]
        if not owners and len(candidates) < len(self.specs):
            tools, failures = self.list_tools()
            owners = [t.server for t in tools if t.name == name]
        if len(owners) == 1:
            return owners[0], name
        if not owners:
            unreachable = f" ({len(failures)} server(s) unreachable)" if failures else ""
            hint = did_you_mean(name, {t.name for t in tools} | {t.qualified_name for t in tools})
            if dot and server not in self.specs and (self.keeper is not None or not hint):  # a server not here
                raise UsageError(self.no_server(server, f"no server has a tool named {name!r}{unreachable}"))
            raise UsageError(f"no server has a tool named {name!r}{unreachable}{hint}")
        raise UsageError(f"tool name {name!r} is ambiguous: " + ", ".join(f"{s}.{name}" for s in owners))

    def listed(self) -> dict[str, list[str]]:
        """The tool names of every server listed so far (for the caller's cache)."""
        return {server: [t.name for t in tools] for server, tools in self._tools.items()}

    def status(self) -> list[dict[str, Any]]:
        """Each server's state for a health page: no addresses, commands or error texts (they may
        carry secrets), nothing connected or listed by asking."""
        rows = []
        for name in self.specs:
            session = self._sessions.get(name)
            state = "failed" if name in self._failed else "connected" if session is not None else "not connected"
            if session is not None and session.closed_error is not None:
                state = "closed"
            row: dict[str, Any] = {"name": name, "state": state}
            if session is not None:
                row.update(era=session.era, protocolVersion=session.protocol_version)
            if name in self._tools:
                row["tools"] = len(self._tools[name])
            rows.append(row)
        return rows

    def find_tool(self, server: str, tool: str) -> Tool | None:
        return next((t for t in self.tools_of(server) if t.name == tool), None)

    def require_tool(self, server: str, tool: str) -> Tool:
        """The tool, or a UsageError naming the server and the closest names it has; for a
        SERVER.TOOL whose SERVER is not here (the one server of a session or an ad-hoc target
        was asked for a dotted name), that SERVER is what is missing, and the error says so."""
        found = self.find_tool(server, tool)
        if found is None:
            hint = did_you_mean(tool, [t.name for t in self.tools_of(server)])
            named, dot, _ = tool.partition(".")
            if dot and named not in self.specs and (self.keeper is not None or not hint):
                raise UsageError(self.no_server(named, f"server {server} has no tool named {tool!r}"))
            raise UsageError(f"server {server} has no tool named {tool!r}{hint}")
        return found

    def no_server(self, name: str, missing: str) -> str:
        """`missing` (no such tool), said of a SERVER.TOOL whose SERVER this catalog does not
        hold: that the server is not here, and how to go on."""
        held = ", ".join(self.specs) or "none"
        hint = did_you_mean(name, self.specs)
        if self.keeper is not None:
            session = self.keeper[1]
            return (f"session {session} (in use) does not hold server {name!r}{hint} (it holds: {held}): "
                    f"start a session that does (llmc session start NAME -s {name}) or leave this one "
                    "(unset LLMC_SESSION, or no --session)")
        return f"{missing}, and there is no server {name!r}{hint} (servers: {held})"

    def close(self) -> None:
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        if len(sessions) <= 1:  # the usual command: no pool to start for one
            for session in sessions:
                session.close()
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(sessions)))) as pool:
            list(pool.map(lambda s: s.close(), sessions))

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Progress:
    """Catalog.each's reports to its on_each: servers settle on their own threads, in any order;
    nothing is reported after the end."""

    def __init__(self, names: list[str], report: Callable[[int, list[str]], None] | None) -> None:
        self.waiting = list(names)
        self.total = len(names)
        self.report = report
        self.lock = threading.Lock()
        if report is not None:
            report(self.total, list(self.waiting))

    def settled(self, name: str, _future: Any = None) -> None:
        if self.report is None:
            return
        with self.lock:
            if name in self.waiting:
                self.waiting.remove(name)
                self.report(self.total, list(self.waiting))

    def end(self) -> None:
        with self.lock:
            report, self.report = self.report, None
            if report is not None and self.waiting:
                report(self.total, [])


def _settled(future: Future[Any], seconds: float) -> bool:
    from concurrent.futures import wait as futures_wait

    return bool(futures_wait([future], seconds).done)

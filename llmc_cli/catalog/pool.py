"""One catalog's own connections: each server's session opened once, on first use, under that
server's lock; a server that failed to connect is not retried until restarted; closing ends them
all. Which catalog's connection serves a server (per-host sharing) is catalog/shared.py's part."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from llmc_cli.errors import ConnectionFailed, LlmcError, UsageError
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.stores import Stores
from llmc_cli.model import NamedTuple, ServerSpec

if TYPE_CHECKING:
    from llmc_cli.mcp.transports.stdio import StdioTransport


class ConnectOptions(NamedTuple):
    """How a catalog's connections are made, one value shared by Catalog and Pool (and passed
    on, changed where it must be, to each per-host catalog). `hooks`: the client's progress,
    logging, elicitation and sampling; `builtins`: the built-in servers' factories;
    `on_stderr(server, line)`: a stdio server's stderr; `keeper`: (socket path, session name)
    when the servers live in a session keeper; `stores`: era cache and OAuth tokens for
    connect(); `unusable`: servers that cannot even be configured (an unset ${VAR}), each with
    its error: failed from the start, never connected; `admit(server)`: a context each new
    connection starts in (raises to refuse it). A NamedTuple (immutable; _replace makes a changed
    copy): cheaper to create at import than a dataclass, on every command's path."""

    hooks: ClientHooks | None = None
    builtins: Mapping[str, Callable[[ServerSpec], Any]] | None = None
    on_stderr: Callable[[str, str], None] | None = None
    keeper: tuple[str, str] | None = None
    stores: Stores | None = None
    unusable: Mapping[str, LlmcError] | None = None
    admit: Callable[[str], AbstractContextManager[None]] | None = None
    # hides the secrets llmc handed the servers (env, headers) in what they say back: their
    # stderr lines and the errors of a connection that failed (which quote them)
    mask: Callable[[str], str] | None = None
    # a keeper's servers: how this command would reach each (ServerSpec.reach), which the keeper
    # checks against how it started it (a server it holds for another token is not this one)
    reach: Mapping[str, str] | None = None
    # `on_connected(server, session)`: each new connection of its own, once it is open (not one
    # in a session keeper): the gateway opens a 2026-07-28 upstream's listen stream here. Must
    # not wait on the server (called under the server's lock).
    on_connected: Callable[[str, ClientSession], None] | None = None


class Pool:
    def __init__(
        self,
        specs: list[ServerSpec],
        options: ConnectOptions | None = None,
        *,
        on_changed: Callable[[str, str], None] | None = None,
        started: Mapping[str, StdioTransport] | None = None,
    ) -> None:
        """`options`: how connections are made (ConnectOptions). `on_changed(server, method)`: a
        server's list_changed notifications (the hooks' own on_list_changed is the caller's to call).
        `started`: stdio servers whose processes were started already (services/sandbox.py launch),
        by name: the pool's from now on, adopted by their first connection; close() stops those
        not adopted, or being adopted."""
        self.options = options = options or ConnectOptions()
        unusable = options.unusable
        names = [s.name for s in specs] + list(unusable or {})
        if len(set(names)) != len(names):
            raise UsageError(f"duplicate server name among {names}")
        self.specs = {s.name: s for s in specs}
        self.specs.update({name: ServerSpec(name=name) for name in unusable or {}})  # never connected
        self.on_changed = on_changed
        self.started = dict(started or {})
        self.sessions: dict[str, ClientSession] = {}
        self.connect_seconds: dict[str, float] = {}  # how long each connection took to open (ping shows it)
        self.failed: dict[str, LlmcError] = dict(unusable or {})  # a server that failed to connect is not retried
        self.unusable = frozenset(unusable or {})  # ...and one that cannot be configured never is
        self.locks = {name: threading.Lock() for name in self.specs}
        self.closed = False
        self._closing = threading.Lock()  # a session is adopted, or the pool closed, never both at once
        # Every call comes on a thread of its own that only waits for it (the gateway's host
        # connections): an HTTP server's requests are then posted on that thread.
        self.posts_on_caller_thread = False

    def session(self, server: str) -> ClientSession:
        """The server's session on a connection of this pool, connecting on first use. The
        server must be one of `specs`."""
        with self.locks[server]:
            if server in self.failed:
                raise self.failed[server]
            if self.closed:
                # A thread still working after the command ended (interrupted) must not start
                # a server nobody will stop.
                raise ConnectionFailed(f"{server}: the command is ending; no new connection")
            if server not in self.sessions:
                spec = self.specs[server]
                stderr = self._stderr_of(server)
                hooks = self.options.hooks or ClientHooks()
                if self.on_changed is not None:
                    hooks = replace(hooks, on_list_changed=self.on_changed)
                # a refusal is no failure of the server: raised on entering, not kept in failed
                with self.options.admit(server) if self.options.admit is not None else contextlib.nullcontext():
                    self._connect(server, spec, hooks, stderr)
            return self.sessions[server]

    def _stderr_of(self, server: str) -> Callable[[str], None] | None:
        """The stderr handler for one server's process lines (None: the lines go nowhere)."""
        on_stderr, mask = self.options.on_stderr, self.options.mask
        if on_stderr is None:
            return None
        if mask is not None:
            return lambda line: on_stderr(server, mask(line))
        return lambda line: on_stderr(server, line)

    def _connect(self, server: str, spec: ServerSpec, hooks: ClientHooks, stderr: Callable[[str], None] | None) -> None:
        """Open the server's session into sessions (its lock held); a failure is kept in failed."""
        started = time.monotonic()
        try:
            if self.options.keeper:
                from llmc_cli.keeper.transport import attach

                path, keeper_name = self.options.keeper
                reach = (self.options.reach or {}).get(server)
                self._adopt(server, attach(path, keeper_name, server, timeout=spec.timeout, hooks=hooks, reach=reach))
            else:
                # A process started already stays in `started` while its session is made, so that
                # close() stops it even then (a warm-up thread outliving its failed command).
                early = self.started.get(server)
                try:
                    session = connect(
                        spec,
                        stores=self.options.stores,
                        hooks=hooks,
                        builtins=self.options.builtins,
                        on_stderr=stderr,
                        started=early,
                    )
                finally:
                    if early is not None:
                        self.started.pop(server, None)
                if self.posts_on_caller_thread and hasattr(session.transport, "posts_on_caller_thread"):
                    session.transport.posts_on_caller_thread = True
                self._adopt(server, session)
                if self.options.on_connected is not None:
                    self.options.on_connected(server, session)
            self.connect_seconds[server] = time.monotonic() - started
        except LlmcError as exc:
            sandbox_hint(spec, exc)
            if self.options.mask is not None:
                mask_error(exc, self.options.mask)
            self.failed[server] = exc
            raise

    def _adopt(self, server: str, session: ClientSession) -> None:
        """A new session joins the pool, unless the pool closed while it was connecting (a
        background warm-up outliving its command): then it is closed, not left running."""
        with self._closing:
            if not self.closed:
                self.sessions[server] = session
                return
        session.close()
        raise ConnectionFailed(f"{server}: the command is ending; no new connection")

    def add_servers(self, specs: list[ServerSpec]) -> None:
        """Servers learnt after the pool was made (a keeper lists what it holds when the first
        one attaches). A spec for a server already here replaces that spec, not its session."""
        for spec in specs:
            self.specs[spec.name] = spec
            self.locks.setdefault(spec.name, threading.Lock())

    def warm_up(self, servers: list[str] | None = None) -> None:
        """Start connecting every server (or these) in the background, so server start-up
        overlaps with whatever the command does next (loading the profile, the policy)."""
        for name in servers if servers is not None else list(self.specs):
            if name not in self.specs:
                continue  # an unknown server: the command's use of it says so
            threading.Thread(target=self._connect_quietly, args=(name,), daemon=True, name=f"llmc-connect-{name}").start()

    def _connect_quietly(self, server: str) -> None:
        try:
            self.session(server)
        except LlmcError:
            pass  # kept in self.failed; reported when the command uses the server

    def held(self) -> int:
        """How many connections of its own are open (processes, upstream sessions)."""
        return sum(1 for session in list(self.sessions.values()) if session.closed_error is None)

    def busy(self) -> bool:
        """Whether a request is waiting on one of its own connections."""
        return any(session.busy() for session in list(self.sessions.values()))

    def release(self, on_drop: Callable[[str], None] | None = None) -> None:
        """Close its own connections and stay usable: the next use starts them again (what
        they kept is lost). For a caller that reclaims idle ones; a server being connected at
        this moment is left alone (its lock is not waited for: callers may hold another's).
        `on_drop(server)` runs under the server's lock as its session is dropped."""
        for server in list(self.sessions):
            if not self.locks[server].acquire(blocking=False):
                continue
            try:
                session = self.sessions.pop(server, None)
                if on_drop is not None:
                    on_drop(server)
            finally:
                self.locks[server].release()
            if session is not None:
                session.close()

    def restart(self, server: str, on_drop: Callable[[str], None] | None = None) -> bool:
        """Forget a server whose connection ended, or whose start failed, so that the next use
        starts it again. True when there was one to forget. What the old process or session kept
        (handles, memory) is lost. `on_drop` as for release()."""
        if server not in self.specs or server in self.unusable:
            return False
        session = self.sessions.get(server)
        if (session is None or session.closed_error is None) and server not in self.failed:
            return False  # nothing to forget (the gateway asks before every call): no lock taken
        with self.locks[server]:
            session = self.sessions.get(server)
            if session is not None and session.closed_error is not None:
                del self.sessions[server]
                if on_drop is not None:
                    on_drop(server)
                session.close()
                return True
            return self.failed.pop(server, None) is not None

    def working_directory(self, server: str) -> str | None:
        """Where the server resolves relative paths, when llmc knows it (the policy judges
        relative path arguments there). A stdio server runs in its `cwd`, relative to llmc's;
        without one it inherits llmc's (the stdio transport passes no other). The built-in
        workspace starts relative paths at its first root. None for a remote server, and for a
        server a session keeper runs with a relative or no `cwd` (it started wherever the keeper
        was started)."""

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
        if self.options.keeper and not os.path.isabs(base):
            return None
        # Joined, not normalised: the policy resolves it as the kernel does (`link/..` included).
        return os.getcwd() if base == "." else os.path.join(os.getcwd(), base)

    def status(self, tool_counts: Mapping[str, int]) -> list[dict[str, Any]]:
        """Each server's state for a health page: no addresses, commands or error texts (they may
        carry secrets), nothing connected or listed by asking. `tool_counts`: the servers whose
        tools were listed, with how many."""
        rows = []
        for name in self.specs:
            session = self.sessions.get(name)
            state = "failed" if name in self.failed else "connected" if session is not None else "not connected"
            if session is not None and session.closed_error is not None:
                state = "closed"
            row: dict[str, Any] = {"name": name, "state": state}
            if session is not None:
                row.update(era=session.era, protocolVersion=session.protocol_version)
            if name in tool_counts:
                row["tools"] = tool_counts[name]
            rows.append(row)
        return rows

    def close(self) -> None:
        with self._closing:
            self.closed = True
            sessions, self.sessions = list(self.sessions.values()), {}
            unused, self.started = list(self.started.values()), {}
        # each close of a process may wait out its grace (the spec's stdin-close, then SIGTERM):
        # side by side, the command ends after the slowest, not after their sum
        closes = [t.close for t in unused] + [s.close for s in sessions]  # unused: started, never got to
        if len(closes) <= 1:  # the usual command: no pool to start for one
            for close in closes:
                close()
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(8, len(closes))) as pool:
            list(pool.map(lambda close: close(), closes))


_PATH_TROUBLE = (
    "no such file or directory",
    "enoent",
    "eacces",
    "permission denied",
    "not accessible",
    "cannot access",
    "does not exist",
    "read-only file system",
    "erofs",
    "cannot find module",
)


def mask_error(exc: LlmcError, mask: Callable[[str], str]) -> None:
    """`exc` with `mask` applied to its message and the server's stderr lines it quotes."""
    exc.message = mask(exc.message)
    exc.args = (exc.message, *exc.args[1:])
    if exc.details.get("stderr"):
        exc.details["stderr"] = [mask(str(line)) for line in exc.details["stderr"]]


def sandbox_hint(spec: ServerSpec, exc: LlmcError) -> None:
    """A sandboxed server that exited at start saying a path is missing or not accessible: its
    error names what the sandbox shows it and how to add a path (once)."""
    sandbox = spec.sandbox
    if spec.kind != "stdio" or not spec.launch or sandbox is None or not isinstance(exc, ConnectionFailed):
        return
    lines = [str(line).lower() for line in exc.details.get("stderr") or []]
    if "sandboxed" in exc.message or not any(t in line for line in lines for t in _PATH_TROUBLE):
        return
    shown = "; ".join(
        part
        for part in (
            f"write {', '.join(sandbox.write_paths)}" if sandbox.write_paths else "",
            f"read {', '.join(sandbox.read_paths)}" if sandbox.read_paths else "",
        )
        if part
    )
    exc.message += (
        f" (server {spec.name} is sandboxed and sees {shown or 'none of your paths'}: add a path to "
        f"write_paths or read_paths of [servers.{spec.name}] in the profile, or re-add it with "
        f"`llmc servers add {spec.name} --replace --write-path DIR -- ...`)"
    )

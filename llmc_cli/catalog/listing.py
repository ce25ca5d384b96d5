"""What servers list: their tools, kept until a server announces a change, and work fanned out
to many servers at once (each), where one dead server never blocks the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from llmc_cli import interrupts
from llmc_cli.errors import LlmcError, RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.inflight import Future
from llmc_cli.mcp.session import ClientSession
from llmc_cli.model import JSONObject, Tool, dataclass

T = TypeVar("T")
MAX_AT_ONCE = 8  # servers worked on at the same time


@dataclass
class ServerFailure:
    server: str
    error: LlmcError

    def to_json(self) -> JSONObject:
        return {"server": self.server, **self.error.to_json()}


class ToolLists:
    """Each server's tools as it last listed them. One per root catalog: a listing is the
    server's, not the connection's, so every host's catalog reads the root's."""

    def __init__(self) -> None:
        self.by_server: dict[str, list[Tool]] = {}
        self._named: dict[str, tuple[list[Tool], dict[str, Tool]]] = {}  # a listing and its tools by name
        # Servers that announced notifications/tools/list_changed since the result cache last
        # looked (services/caching.py drops their cached results).
        self.changed: set[str] = set()
        # When each listing of a 2026-07-28 server goes stale (its ttlMs); expire() drops those
        # that have. An initialize-era listing stays until the server announces a change.
        self.stale_at: dict[str, float] = {}

    def of(self, server: str, session: Callable[[str], ClientSession]) -> list[Tool]:
        """The server's tools, listed through `session(server)` the first time."""
        if server not in self.by_server:
            raw, fresh_for = session(server).list_tools_fresh()
            self.by_server[server] = [Tool.from_mcp(server, t) for t in raw]
            if fresh_for is not None:
                self.stale_at[server] = time.monotonic() + fresh_for
        return self.by_server[server]

    def expire(self) -> None:
        """Drop the listings whose freshness ran out (2026-07-28 utilities/caching: the client
        checks freshness when it needs the data and re-fetches a stale list): the next listing
        asks those servers again. For a long-lived caller's listings (the gateway's hosts), not
        a call's lookup of its tool, which uses the listing held."""
        now = time.monotonic()
        for server, stale_at in list(self.stale_at.items()):
            if now >= stale_at:
                self.forget(server)

    def find(self, server: str, name: str, session: Callable[[str], ClientSession]) -> Tool | None:
        """The server's tool of that name (the first of it), listed the first time, found by one
        lookup: a batch asks for every line's tool, and the policy and the cache ask again."""
        tools = self.of(server, session)
        made = self._named.get(server)
        if made is None or made[0] is not tools:  # an index of this very listing (a new one replaces it)
            made = (tools, {})
            for tool in tools:
                made[1].setdefault(tool.name, tool)
            self._named[server] = made
        return made[1].get(name)

    def forget(self, server: str) -> None:
        """The next listing asks the server again."""
        self.by_server.pop(server, None)
        self._named.pop(server, None)
        self.stale_at.pop(server, None)

    def names(self) -> dict[str, list[str]]:
        """The tool names of every server listed so far (for the caller's cache)."""
        return {server: [t.name for t in tools] for server, tools in self.by_server.items()}

    def counts(self) -> dict[str, int]:
        return {server: len(tools) for server, tools in self.by_server.items()}


def each(
    names: list[str], work: Callable[[str], T], on_each: Callable[[int, list[str]], None] | None = None
) -> tuple[dict[str, T], list[ServerFailure]]:
    """Run work(server) for every server concurrently; failures are collected, not raised.
    `on_each(servers in all, servers still waited for)`: told once at the start, as each server
    settles, and with none waited for at the end."""
    results: dict[str, T] = {}
    failures: list[ServerFailure] = []
    report = _Progress(names, on_each)
    # A thread per server, at most MAX_AT_ONCE working (not concurrent.futures: it imports
    # logging, a good part of a listing's start-up). Daemon threads, not joined: when an
    # interruption leaves the loop early, a thread may still wait for a silent server, and
    # joining it would hold the signal up for that request's whole timeout. Its request ends when
    # the command closes the catalog while unwinding; servers not started by then are not.
    slots = threading.BoundedSemaphore(max(1, min(MAX_AT_ONCE, len(names))))
    ended = threading.Event()
    futures: dict[str, Future[T]] = {name: Future() for name in names}
    try:
        for name, future in futures.items():
            future.add_done_callback(partial(report.settled, name))
            threading.Thread(target=_work, args=(work, name, future, slots, ended), daemon=True, name="llmc-each").start()
        for name, future in futures.items():
            interrupts.wait(future.wait)
            try:
                results[name] = future.result()
            except LlmcError as exc:
                failures.append(ServerFailure(name, exc))
    finally:
        ended.set()
        report.end()
    return results, failures


def offered(session: ClientSession, method: str, key: str, capability: str) -> list[JSONObject] | None:
    """Every page of `method` from a server that offers `capability` (resources, prompts), or
    None when it does not. A server whose declared capabilities lack it is not asked; one whose
    capabilities are unknown here (a session resumed from the era cache) is asked, and "method
    not found" means it does not."""
    if session.capabilities and capability not in session.capabilities:
        return None
    try:
        return session.list_all(method, key)
    except RpcError as exc:
        if exc.code != jsonrpc.METHOD_NOT_FOUND:
            raise
        return None


class _Progress:
    """each()'s reports to its on_each: servers settle on their own threads, in any order;
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


def _work(
    work: Callable[[str], T], name: str, future: Future[T], slots: threading.BoundedSemaphore, ended: threading.Event
) -> None:
    with slots:
        if ended.is_set():  # each() is over (interrupted): not started
            future.set_exception(LlmcError(f"{name}: not started"))
            return
        try:
            future.set_result(work(name))
        except BaseException as exc:  # noqa: BLE001 - handed to each(), which raises what is not an LlmcError
            future.set_exception(exc)

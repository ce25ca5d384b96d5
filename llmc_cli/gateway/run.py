"""Start the gateway on a transport, and stop it: the upstream servers go with it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import UsageError
from llmc_cli.model import clean_line

if TYPE_CHECKING:
    import socket

    from llmc_cli.gateway.forward import WorkerSlot
    from llmc_cli.gateway.toolbox import Toolbox  # imported when the gateway starts, not with this module


MAX_WORKERS = 64
_worker = ""  # "worker K: " in a worker of several (--workers)


def log(message: str) -> None:
    """One line of the gateway's log: what hosts and servers put in it (clientInfo, tool names,
    their stderr) can neither act on the operator's terminal nor start a line of its own."""
    print(f"llmc serve: {_worker}{clean_line(message)}", file=sys.stderr, flush=True)


def _toolbox(profile: LoadedProfile, verbose: int, *, warm: bool = True) -> Toolbox:
    """The served profile's toolbox; `warm`: its upstreams start now, while the host connects
    (HTTP: once the gateway counts them in max_upstreams, http_server.serve)."""
    from llmc_cli.gateway.toolbox import Toolbox

    on_stderr = (lambda server, line: log(f"[{server} stderr] {line}")) if verbose else None
    toolbox = Toolbox(profile, on_stderr=on_stderr, note=log if verbose else None)
    if warm:
        toolbox.warm_up()
    return toolbox


def serve_stdio(profile: LoadedProfile, *, verbose: int = 0) -> None:
    """One host on stdin/stdout until end of input."""
    from llmc_cli.gateway.connection import GatewayConnection
    from llmc_cli.server.stdio import run_stdio

    toolbox = _toolbox(profile, verbose)
    log(f"profile {profile.name}: {len(toolbox.catalog.specs)} server(s) on stdio")
    try:
        run_stdio(GatewayConnection(toolbox, transport="stdio"))
    finally:
        toolbox.close()


def serve_http(
    profile: LoadedProfile,
    address: str,
    *,
    verbose: int = 0,
    idle_seconds: float | None = None,
    max_connections: int | None = None,
    request_seconds: float | None = None,
    max_pending: int | None = None,
    pending_seconds: float | None = None,
    tls: tuple[str, str, str | None] | None = None,
    workers: int = 1,
    setup: Callable[[], None] | None = None,
) -> None:
    """Streamable HTTP (HTTPS with `tls`: cert, key, client CA) until SIGINT, SIGTERM or SIGHUP;
    `workers` processes serving one socket (supervisor.py); `setup` runs in each of them (in
    this process when there is one) before its toolbox is built."""
    from llmc_cli.gateway.access import check_auth, parse_address
    from llmc_cli.gateway.admission import MAX_PENDING, PENDING_SECONDS
    from llmc_cli.gateway.hosts import IDLE_SECONDS, MAX_CONNECTIONS, REQUEST_SECONDS
    from llmc_cli.gateway.http_server import Tls, serve, serve_workers

    check_auth(profile, parse_address(address)[0])  # a bad address or door: refused before any server starts
    secure = Tls(*tls) if tls is not None else None
    if secure is not None:
        secure.context()  # unusable files: refused before any upstream starts
    options: dict[str, Any] = {
        "idle_seconds": idle_seconds or IDLE_SECONDS,
        "max_connections": max_connections or MAX_CONNECTIONS,
        "request_seconds": request_seconds or REQUEST_SECONDS,
        "max_pending": max_pending or MAX_PENDING,
        "pending_seconds": pending_seconds or PENDING_SECONDS,
        "tls": secure,
        "log": log,
    }
    if workers <= 1:
        if setup is not None:
            setup()
        serve(_toolbox(profile, verbose, warm=False), address, **options)
        return

    def worker(slot: WorkerSlot, first: bool, sock: socket.socket, ready: Callable[[], None]) -> None:
        global _worker
        _worker = f"worker {slot.index}: "
        if setup is not None:
            setup()
        serve(
            _toolbox(profile, verbose, warm=False),
            address,
            sock=sock,
            slot=slot,
            announce=first and slot.index == 0,
            on_ready=ready,
            **options,
        )

    serve_workers(workers, address, worker, log)


def worker_count(value: str | int) -> int:
    """--workers / [serve] workers: a number from 1 to MAX_WORKERS, or auto (one per CPU)."""
    if value == "auto":
        return min(os.cpu_count() or 1, MAX_WORKERS)
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise UsageError(f"--workers {value}: give a number from 1 to {MAX_WORKERS}, or auto")
    return int(text)

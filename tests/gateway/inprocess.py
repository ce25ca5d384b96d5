"""The HTTP gateway served from a thread of the test process (http_server.start_server: uvicorn
on an event loop of that thread): no `llmc serve` process to start, the same server, core and
upstreams. What the gateway logs (its start-up lines and, as with -v, each host) is kept in
`lines`."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.gateway.test_http import Gateway

# `llmc serve` options start() may pass, as start_server's keywords
OPTIONS = {
    "--max-connections": ("max_connections", int),
    "--max-pending-connections": ("max_pending", int),
    "--request-timeout": ("request_seconds", float),
    "--pending-timeout": ("pending_seconds", float),
    "--idle-timeout": ("idle_seconds", float),
}


class InProcess(Gateway):
    def __init__(self, running: Any, lines: list[str], thread: threading.Thread, env: dict[str, str | None]) -> None:
        super().__init__(running.port, None)  # type: ignore[arg-type]  # no process: the server runs here
        self.running, self.lines, self.thread, self.saved_env = running, lines, thread, env

    def close(self) -> str:
        """Stop the gateway as SIGTERM would; what it logged, one line each."""
        try:
            self.running.stop()
            self.thread.join(30)
            assert not self.thread.is_alive(), "the gateway did not stop"
            self.running.close()
        finally:
            for name, value in self.saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return "\n".join(self.lines)


def options_of(extra: tuple[str, ...]) -> dict[str, Any] | None:
    """start_server's keywords for `llmc serve` options; None: one it has no keyword for."""
    options: dict[str, Any] = {}
    args = list(extra)
    while args:
        flag = args.pop(0)
        if flag == "-v":
            continue  # hosts are logged in `lines` anyway
        if flag not in OPTIONS or not args:
            return None
        name, kind = OPTIONS[flag]
        options[name] = kind(args.pop(0))
    return options


def serve_in_process(profile: Path, *, env: dict[str, str] | None = None, port: int = 0, **options: Any) -> InProcess:
    """The profile served on 127.0.0.1 (`port`, or a free one) until close(); `env`: set in the
    environment meanwhile (tokens from token_env); `options`: start_server's."""
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway.http_server import start_server
    from llmc_cli.gateway.toolbox import Toolbox

    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    lines: list[str] = []
    try:
        toolbox = Toolbox(load_profile(str(profile)), note=lines.append)  # start_server warms its upstreams
        running = start_server(toolbox, f"127.0.0.1:{port}", log=lines.append, **options)
    except BaseException:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        raise
    thread = threading.Thread(target=serve, args=(running, lines), daemon=True, name="test-gateway")
    thread.start()
    return InProcess(running, lines, thread, saved)


def serve(running: Any, lines: list[str]) -> None:
    """serve_forever, with what the server logs (an error in the app: its traceback) in `lines`."""
    import logging

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    keep = Keep()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(keep)
    try:
        running.serve_forever()
    finally:
        logger.removeHandler(keep)


@contextmanager
def gateway_in_process(profile: Path, **options: Any) -> Iterator[InProcess]:
    """The profile served on 127.0.0.1 (a free port) until the block ends; `options` are
    serve_in_process's (env, idle_seconds, tls, ...)."""
    served = serve_in_process(profile, **options)
    try:
        yield served
    finally:
        served.close()

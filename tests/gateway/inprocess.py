"""The HTTP gateway served from a thread of the test process (http_server.start_server): no
`llmc serve` process to start, the same server, core and upstreams. What the gateway logs (its
start-up lines and, as with -v, each host) is kept in `lines`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.gateway.test_http import Gateway


class InProcess(Gateway):
    def __init__(self, running: Any, lines: list[str]) -> None:
        super().__init__(running.port, None)  # type: ignore[arg-type]  # no process: the server runs here
        self.running, self.lines = running, lines


@contextmanager
def gateway_in_process(profile: Path, **options: Any) -> Iterator[InProcess]:
    """The profile served on 127.0.0.1 (a free port) until the block ends; `options` are
    start_server's (idle_seconds, tls, ...)."""
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway.http_server import start_server
    from llmc_cli.gateway.toolbox import Toolbox

    lines: list[str] = []
    toolbox = Toolbox(load_profile(str(profile)), note=lines.append)
    toolbox.catalog.pool.warm_up()
    running = start_server(toolbox, "127.0.0.1:0", log=lines.append, **options)
    thread = threading.Thread(target=running.serve_forever, daemon=True, name="test-gateway")
    thread.start()
    try:
        yield InProcess(running, lines)
    finally:
        running.stop()
        thread.join(30)
        running.close()

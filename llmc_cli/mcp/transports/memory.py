"""In-memory transport: hosts a server endpoint in this process.

Used for the built-in workspace server (no child process, no start-up cost) and for unit tests
of the session. An endpoint is any object with `handle(message, send)`; it may call `send` any
number of times, from any thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from llmc_cli.errors import ConnectionFailed
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.transports.base import Closed, Deliver


class Endpoint(Protocol):
    def handle(self, message: JSONObject, send: Callable[[JSONObject], None]) -> None: ...


class MemoryTransport:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.protocol_version: str | None = None
        self._inbox: queue.Queue[JSONObject | None] = queue.Queue()
        self._worker: threading.Thread | None = None

    def start(self, deliver: Deliver, closed: Closed) -> None:
        def serve() -> None:
            # One worker keeps the server's view sequential, like a stdio server reading its input.
            while (message := self._inbox.get()) is not None:
                self.endpoint.handle(message, deliver)
            closed(None)

        self._worker = threading.Thread(target=serve, daemon=True, name="llmc-memory-server")
        self._worker.start()

    def send(self, message: JSONObject) -> None:
        if self._worker is None or not self._worker.is_alive():
            raise ConnectionFailed("in-memory server is not running")
        self._inbox.put(message)

    def close(self) -> None:
        if self._worker is not None:
            self._inbox.put(None)
            self._worker.join(timeout=5.0)
        close = getattr(self.endpoint, "close", None)
        if callable(close):
            close()

    def diagnostics(self) -> str:
        return ""

"""What a stdio server's process is given besides its command: its environment (an allow-list
of the user's variables plus what the server's description declares: never the user's whole
environment, which holds tokens for unrelated services) and whether it gets a session of its own.
"""

from __future__ import annotations

import os
import threading
from _queue import SimpleQueue  # queue.SimpleQueue itself, without the queue module
from collections.abc import Callable
from typing import Any, TypeVar

from llmc_cli.mcp.inflight import Future

T = TypeVar("T")

# Variables a server legitimately needs to start (the MCP SDKs pass a similar list).
INHERITED_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "SYSTEMROOT",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "npm_config_cache",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)


def child_environment(declared: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(declared)
    return env


def has_terminal() -> bool:
    """Whether this process has a controlling terminal (which a server left in its session could
    open). No: a pipe, a cron job, CI, a service."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
    except OSError:
        return False
    return True


class _Spawner:
    """One thread, kept until llmc exits, that starts every launched (sandboxed) server: a
    launch (bubblewrap --die-with-parent) ends the server when its parent THREAD ends
    (PR_SET_PDEATHSIG is per thread). A thread and a queue of its own, not a
    concurrent.futures pool: that imports logging, 35 M instructions of a command's start-up."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = SimpleQueue()
        threading.Thread(target=self._serve, daemon=True, name="llmc-spawner").start()

    def run(self, work: Callable[[], T]) -> T:
        """work() on the spawner's thread: its value, or what it raised."""
        future: Future[T] = Future()
        self._jobs.put((work, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            work, future = self._jobs.get()
            try:
                future.set_result(work())
            except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread
                future.set_exception(exc)


_spawner_lock = threading.Lock()
_spawners: list[_Spawner] = []


def spawner() -> _Spawner:
    """The one spawner (made by the first launch)."""
    with _spawner_lock:
        if not _spawners:
            _spawners.append(_Spawner())
        return _spawners[0]

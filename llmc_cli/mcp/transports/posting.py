"""A request's POST as its sender sees it (mcp/transports/streamable_http.py): posted on a shared
worker thread while send() waits only briefly for the reply's head (Head), or posted on the
caller's own thread with its socket watched so a cancel from another thread can shut it down at
once (Posting). Either way exactly one of the two sides reports a failure."""

from __future__ import annotations

import socket
import threading
import time

from llmc_cli.errors import LlmcError
from llmc_cli.mcp.workers import Workers, shared

HEAD_WAIT = 1.0  # seconds send() waits for a request's reply headers before returning
# The era probe and the handshake: their HTTP status decides what comes next, so wait for it.
WAIT_FOR_ANSWER = ("server/discover", "initialize")


class Head:
    """How a request's POST went, as far as send() waits for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Event()  # the POST finished, or (when asked) its status is known
        self.finished = False
        self.error: LlmcError | None = None
        self.abandoned = False

    def wait(self, seconds: float) -> LlmcError | None:
        """send()'s side: wait up to `seconds` for the POST to settle; its error when it failed in
        time, else None (a failure later is the POST's to report: settle() says so)."""
        deadline = time.monotonic() + seconds
        while not self.settled.is_set() and (left := deadline - time.monotonic()) > 0:
            self.settled.wait(min(left, 0.5))  # short sleeps: a signal's handler runs when this thread wakes
        with self.lock:  # decided together with the POST's end: exactly one reports an error
            self.abandoned = not self.finished
        return None if self.abandoned else self.error

    def settle(self, error: LlmcError | None) -> bool:
        """The POST's side: tell send() how it went (the first word counts) and wake it; True when
        send() no longer listens (it gave up waiting, or heard already): a later error is then
        reported by the POST."""
        with self.lock:  # decided together with send()'s giving up: exactly one reports
            late = self.abandoned or self.finished
            if not late:
                self.finished = True
                self.error = error
        self.settled.set()
        return late


class Posting:
    """A request posted on its caller's thread: the socket it waits on until the reply's head is
    in, for a cancel from another thread to shut down (the read then fails at once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # held while shutting down: a socket let go is never touched
        self.sock: socket.socket | None = None
        self.aborted = False

    def watch(self, sock: socket.socket | None) -> None:
        with self.lock:
            self.sock = sock
            if sock is not None and self.aborted:
                _shut(sock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            if self.sock is not None:
                _shut(self.sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed already


def post_workers() -> Workers:
    """The threads every Streamable HTTP transport of the process posts its requests on."""
    return shared("llmc-http-post")

"""A request answered on its handler's own thread (McpServer.inline_calls): the call runs where
the request was read, and its reply goes out as one JSON body when nothing had to reach the host
before it (the Streamable HTTP transport lets a server answer any POSTed request with JSON or an
SSE stream). Only when something must be written while the call still runs (a progress or log
notification, a request to the host, a cancellation, or just a call that takes long) does a
writer thread take the reply over, and it writes the SSE stream (or the JSON error of a
cancellation) as replies.py always did. Most calls thus cost no thread switch and one event-loop
wake-up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from queue import SimpleQueue

from llmc_cli.gateway.sessions import CANCELLED
from llmc_cli.mcp.messages import JSONObject, RequestId
from llmc_cli.mcp.workers import shared

HURRY_SECONDS = 0.5  # a call still running after this gets its stream (head, priming event, keep-alives)
IDLE_SECONDS = 30.0  # the watchdog's thread ends after this long with nothing to watch


class InlineReply:
    """The messages for one request while its call runs on the handler's thread. The call's final
    reply is kept for the handler (`settle`), unless a writer took the reply over before it came:
    then every message goes to `queue`, which the writer reads. `streamed`: the host accepts an
    SSE stream for it (otherwise only the final reply, or a cancellation, reaches it)."""

    def __init__(self, msg_id: RequestId | None, streamed: bool, write: Callable[[], JSONObject | None]) -> None:
        self.msg_id = msg_id
        self.streamed = streamed
        self.queue: SimpleQueue[JSONObject] = SimpleQueue()
        self.final: JSONObject | None = None
        self.writing = False  # a writer thread owns the reply
        # The writer has returned: made, under the lock, with `writing` (most calls have no writer).
        self.done: threading.Event | None = None
        self.written: JSONObject | None = None  # what the writer returned
        self._write = write
        self._lock = threading.Lock()

    def put(self, message: JSONObject) -> None:
        """A message for the host (from the call, an upstream's reader, or HostSession.cancel)."""
        with self._lock:
            if self.final is not None:
                return  # answered: nothing more reaches the host on this request
            start = False
            if not self.writing:
                if message is not CANCELLED and "method" not in message and message.get("id") == self.msg_id:
                    self.final = message
                    return
                if not self.streamed and message is not CANCELLED:
                    return  # a JSON reply carries nothing before its result
                self.writing = start = True
                self.done = threading.Event()
            self.queue.put(message)
        if start:
            self._start()

    def hurry(self) -> None:
        """The call takes long: a writer takes the reply over (its stream starts)."""
        with self._lock:
            if self.writing or self.final is not None:
                return
            self.writing = True
            self.done = threading.Event()
        self._start()

    def settle(self) -> JSONObject | None:
        """Once the call has returned on the handler's thread: its final reply, for the handler to
        write as it is; None when a writer has the reply (started now if it had none: a request
        that stays open, or one answered elsewhere)."""
        with self._lock:
            if self.final is not None:
                return self.final
            if self.writing:
                return None
            self.writing = True
            self.done = threading.Event()
        self._start()
        return None

    def outcome(self) -> JSONObject | None:
        """What the writer returned, once it has (settle() returned None: one was started)."""
        assert self.done is not None
        self.done.wait()
        return self.written

    def _start(self) -> None:
        WRITERS.submit(self._run)

    def _run(self) -> None:
        done = self.done
        assert done is not None
        try:
            self.written = self._write()
        finally:
            done.set()


WRITERS = shared("llmc-gateway-reply")


class Watchdog:
    """One thread for every inline call: a call still running HURRY_SECONDS after it started is
    hurried (InlineReply.hurry). Watching costs a dict entry, not a timer; the thread sleeps until
    the earliest call is due (most are answered by then: it then sleeps on to the next), not a
    wake-up every few milliseconds, each a GIL hand-off among the calls it watches."""

    def __init__(self) -> None:
        self._due: dict[InlineReply, float] = {}
        self._lock = threading.Lock()
        self._running = False

    def watch(self, reply: InlineReply) -> None:
        with self._lock:
            # Every call is due HURRY_SECONDS after it started: one watched later is due later,
            # so the thread, asleep until an earlier one is due, need not be woken.
            self._due[reply] = time.monotonic() + HURRY_SECONDS
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, daemon=True, name="llmc-gateway-watchdog").start()

    def forget(self, reply: InlineReply) -> None:
        with self._lock:
            self._due.pop(reply, None)

    def _run(self) -> None:
        idle_since: float | None = None
        while True:
            now = time.monotonic()
            with self._lock:
                late = [reply for reply, due in self._due.items() if due <= now]
                for reply in late:
                    del self._due[reply]
                if self._due:
                    idle_since, wait = None, min(self._due.values()) - now
                else:
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since >= IDLE_SECONDS:
                        self._running = False
                        return
                    wait = HURRY_SECONDS  # a call watched meanwhile is due no sooner than this
            for reply in late:
                reply.hurry()
            time.sleep(max(wait, 0.001))


WATCHDOG = Watchdog()

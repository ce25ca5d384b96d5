"""The request matcher: the requests of one connection that await their reply, each id's future,
the time of its last sign of life (progress), and the progress tokens callers chose themselves.
Whoever sends decides what to send and what a reply means; this table only matches replies to
waiters and keeps their deadlines. Used for every request llmc sends and awaits: the client
session's (mcp/session.py), a server's to its client (mcp/server.py, the gateway's connection),
the session keeper's to an attached caller.

A standing request (a 2026-07-28 `subscriptions/listen` stream) is matched like any other, but it
is nobody's wait: it stays open for the connection's life, so it counts neither for `alone()`
(a caller alone with it still reads its own reply), nor for `waiting()` (a connection with only
standing requests is idle), nor as the "one request in flight" `unmatched()` may attribute an
odd reply to, nor as a request a server's untied message may belong to (`owners(None)`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from llmc_cli.errors import LlmcError, ProtocolError
from llmc_cli.mcp.messages import ProgressToken
from llmc_cli.model import JSONObject, clean_line

T = TypeVar("T")

PROGRESS_EXTENSION_CAP = 10  # progress may extend a request's deadline, up to this many timeouts

# The deadline (time.monotonic()) of the request being sent on this thread, set by the session
# around transport.send(): a transport that reads the reply in send() (HTTP on the caller's
# thread) ends at it, however the bytes arrive. Bytes never extend it; progress may (wait()).
SENDING = threading.local()


def sending_deadline() -> float | None:
    """The deadline of the request this thread is sending, if a session set one."""
    return getattr(SENDING, "deadline", None)


def set_sending_deadline(deadline: float | None) -> None:
    SENDING.deadline = deadline


class _AfterSend(threading.local):
    """AFTER_SEND.call: run once, in the sending thread, when this thread's next request is sent
    and before its reply is awaited (the pipeline's audit sync beside the server's work); never
    raises. None (the class attribute, each thread's start) when nothing waits: read without a
    getattr default, which on a thread that never set it raised and dropped an AttributeError
    every request (~2,000 instructions)."""

    call: Callable[[], None] | None = None


AFTER_SEND = _AfterSend()


Reply = JSONObject  # a JSON-RPC response or error object
# A transport's pump(future, seconds, alone) (stdio): reads and delivers on the waiting thread
# until the future is done or the time is up, when alone(); False: wait for the reply to be delivered.
# (Given the request's id as well, stdio's returns that request's reply as read: session._request_raw.)
Pump = Callable[["Future[Reply]", float, Callable[[], bool]], bool]


class Future(Generic[T]):
    """What one thread waits for and another hands over: the part of concurrent.futures.Future
    a session uses (result, set_result, set_exception, done, add_done_callback). Not that class
    itself, because concurrent.futures imports logging: ~5 ms of every command's start-up. The
    first outcome set wins; a later one (a reply racing the connection's end) is dropped."""

    # One lock for every future, not one made a future (a request each): it is held only to set
    # or read a few fields, never while anything is called, so no future waits long on another's.
    _lock = threading.Lock()

    # Each future's fields start as these class attributes (no __init__: a Python call less a
    # request); _settle and the rest set the instance's own.
    _done = False
    _value: T | None = None
    _error: BaseException | None = None
    # Tuples, new ones made only when a callback is added or a thread waits (a caller that
    # reads its own reply never does): no two lists made and freed a request for nothing.
    _callbacks: tuple[Callable[[Future[T]], object], ...] = ()
    # A lock per waiting thread, released when the future is done, not an Event per future.
    _waiters: tuple[threading.Lock, ...] = ()

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._value, self._error = value, error
            self._done = True
            callbacks, waiters = self._callbacks, self._waiters
            self._callbacks = self._waiters = ()
        for waiter in waiters:
            waiter.release()
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[Future[T]], object]) -> None:
        """Called with the future once it is done: at once when it is already."""
        with self._lock:
            if not self._done:
                self._callbacks = (*self._callbacks, callback)
                return
        callback(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is done, waiting up to `timeout` seconds for it."""
        if self._done:
            return True
        waiter = threading.Lock()
        waiter.acquire()
        with self._lock:
            if self._done:
                return True
            self._waiters = (*self._waiters, waiter)
        if not waiter.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            with self._lock:
                self._waiters = tuple(w for w in self._waiters if w is not waiter)
        return self._done

    def result(self, timeout: float | None = None) -> T:
        """The value, or the exception raised; TimeoutError when not done within `timeout`."""
        if not self._done and not self.wait(timeout):
            raise TimeoutError
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class DeadlinePassed(Exception):
    """No reply within the timeout, extended by progress up to PROGRESS_EXTENSION_CAP timeouts."""


class InFlight:
    """Thread-safe: the transport's reader resolves what the callers' threads wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[int | str, Future[Reply]] = {}
        self._activity: dict[int | str, float] = {}  # request id -> time of last progress
        self._by_token: dict[object, int | str] = {}  # a caller's own progress token -> request id
        self._token_of: dict[int | str, ProgressToken] = {}  # and back
        self._standing: set[int | str] = set()  # the long-lived requests among _futures

    def open(
        self,
        request_id: int | str,
        *,
        timed: bool = True,
        token: ProgressToken | None = None,
        standing: bool = False,
        at: float | None = None,
    ) -> Future[Reply]:
        """A future for the reply to `request_id`. `timed`: progress extends its deadline (the
        session waits for it), counted from `at` (time.monotonic(); default now) until progress
        comes; `token`: the caller's own progress token, for `cancel`; `standing`: a long-lived
        request nobody waits on (see the module's docstring)."""
        future: Future[Reply] = Future()
        # (acquire and release, not `with`: it looks up and binds __enter__ and __exit__, ~1,000
        # instructions; open and close run once a request)
        lock = self._lock
        lock.acquire()
        try:
            self._futures[request_id] = future
            if standing:
                self._standing.add(request_id)
            if timed:
                self._activity[request_id] = time.monotonic() if at is None else at
            if token is not None:
                self._by_token[token] = request_id
                self._token_of[request_id] = token
        finally:
            lock.release()
        return future

    def close(self, request_id: int | str) -> None:
        """Stop waiting for `request_id` (a late reply is then dropped)."""
        lock = self._lock  # (as open's)
        lock.acquire()
        try:
            self._futures.pop(request_id, None)
            self._activity.pop(request_id, None)
            if self._standing:  # (most connections have none, nor callers' tokens: two calls less a request)
                self._standing.discard(request_id)
            if self._token_of:
                token = self._token_of.pop(request_id, None)
                if token is not None and self._by_token.get(token) == request_id:
                    del self._by_token[token]
        finally:
            lock.release()

    def ids(self) -> list[int | str]:
        """Every request in flight, standing ones included (what a closing session cancels)."""
        with self._lock:
            return list(self._futures)

    def waited(self) -> list[int | str]:
        """The requests in flight that someone waits on: the standing ones left out."""
        with self._lock:
            return [rid for rid in self._futures if rid not in self._standing]

    def by_token(self, token: object) -> tuple[int | str | None, Future[Reply] | None]:
        """The request sent with a caller's progress token, and its future while it is awaited."""
        with self._lock:
            request_id = self._by_token.get(token)
            return request_id, self._futures.get(request_id) if request_id is not None else None

    def owners(self, request_id: int | str | None) -> tuple[ProgressToken | None, ...]:
        """The callers' own progress tokens (None for a request without one) of the requests a
        message may belong to: the request `request_id` while it is in flight; with no id, every
        request in flight that someone waits on (a standing request is no caller's)."""
        with self._lock:
            if request_id is None:
                return tuple(self._token_of.get(rid) for rid in self._futures if rid not in self._standing)
            return (self._token_of.get(request_id),) if request_id in self._futures else ()

    def resolve(self, reply: Reply) -> bool:
        """Hand a reply to its waiter; False when nothing awaits its id (late after a timeout, a
        confused server: the caller judges it)."""
        rid = reply.get("id")
        # (a JSON true is no id 1, though Python's True == 1: by exact type, as JSON makes them;
        # one dict read, atomic: no lock around it)
        future = self._futures.get(rid) if type(rid) is int or type(rid) is str else None
        if future is not None and not future._done:  # done() and set_result(), two calls less a reply
            future._settle(reply, None)
        return future is not None

    def unmatched(self, reply: Reply, last_sent: int, server: str) -> None:
        """A reply whose id no request awaits (resolve() said so). With one request in flight it
        is told: an id echoed as a string ("7" for 7) or an error with a null id (JSON-RPC's when
        the request's id could not be read) is its reply; an id never sent (above `last_sent`,
        or no number) fails it now with a protocol error (a lying server), not at its timeout.
        Otherwise (late after a timeout or a cancellation, or one of several) it is dropped.
        Standing requests are not counted: a stream open for the connection's life would
        otherwise turn every such reply into one of several, and none is a caller's to fail."""
        waiting = self.waited()
        if len(waiting) != 1:
            return
        (only,) = waiting
        rid = reply.get("id")
        if rid == str(only) or (rid is None and "error" in reply):
            self.resolve({**reply, "id": only})
        elif not isinstance(rid, int) or isinstance(rid, bool) or rid > last_sent:
            said = clean_line(repr(rid))[:80]
            self.fail(only, ProtocolError(f"{server}: answered request id {said}, which was never sent"))

    def fail(self, request_id: int | str, error: BaseException) -> None:
        """The request's waiter gets `error` instead of a reply."""
        with self._lock:
            future = self._futures.get(request_id)
        if future is not None and not future.done():
            future.set_exception(error)

    def progressed(self, token: object) -> None:
        """A progress notification: the request it belongs to is alive, its deadline moves."""
        with self._lock:
            request_id = self._by_token.get(token, token)
            if request_id in self._activity:
                self._activity[request_id] = time.monotonic()

    def exchange(self, request_id: int | str, send: Callable[[], None], timeout: float) -> Reply:
        """Send a request (`send` writes it) and wait up to `timeout` seconds for its reply, which
        progress does not extend (a server asking its client, the keeper asking a caller).
        TimeoutError when none came; the request is no longer awaited afterwards either way."""
        future = self.open(request_id, timed=False)
        try:
            send()
            return future.result(timeout)
        finally:
            self.close(request_id)

    def alone(self) -> bool:
        """Whether exactly one request awaits its reply (standing ones are awaited by nobody)."""
        return len(self._futures) - len(self._standing) == 1

    def wait(
        self, request_id: int | str, future: Future[Reply], timeout: float, started: float | None = None, pump: Pump | None = None
    ) -> Reply:
        """The reply, or DeadlinePassed `timeout` seconds after the last progress, counted from
        `started` (when the request was sent; default now), at most PROGRESS_EXTENSION_CAP
        timeouts in all. Polls in half seconds so that Ctrl-C is seen. `pump`: the transport's
        (stdio): the waiting thread reads the replies itself when it is the only one waiting."""
        started = time.monotonic() if started is None else started
        hard_deadline = started + timeout * PROGRESS_EXTENSION_CAP
        while True:
            if future._done:  # result() without its call (and done()'s): a reply each
                if future._error is not None:
                    raise future._error
                return future._value  # type: ignore[return-value]  # done without an error: the reply
            last = self._activity.get(request_id, started)  # (one dict read: atomic, no lock around it)
            # (conditional expressions, not min(): ~700 instructions a call of it, three a reply)
            due = last + timeout
            remaining = (due if due < hard_deadline else hard_deadline) - time.monotonic()
            if remaining <= 0:
                raise DeadlinePassed
            slice_ = remaining if remaining < 0.5 else 0.5
            if pump is not None and pump(future, slice_, self.alone):
                continue
            try:
                return future.result(timeout=slice_)
            except TimeoutError:
                continue

    def fail_all(self, error: LlmcError) -> None:
        """Every waiter gets `error` (the connection ended)."""
        with self._lock:
            futures = list(self._futures.values())
        for future in futures:
            if not future.done():
                future.set_exception(error)

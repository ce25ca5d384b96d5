"""Interruption as one thing: SIGINT (Ctrl-C), SIGTERM (what `timeout`, systemd, CI and Kubernetes
send) and SIGHUP (the terminal went away) all raise `Interrupted` in the main thread, where every
wait of llmc is interruptible, so the command unwinds the way Ctrl-C always did: requests in flight
are cancelled, every decided call gets an `interrupted` outcome record, servers are stopped.

A signal that arrives while the main thread writes an audit record waits until the record is
whole (`deferred()`): a record is never cut in half by an interruption. Worker threads (a batch,
the calls of `ask`) are never interrupted themselves; they ask `requested()` before starting a call.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from llmc_cli.errors import ExitCode

if TYPE_CHECKING:
    import signal
else:
    # _signal: the C module the stdlib's `signal` wraps, the same functions with plain int
    # numbers and handlers. `signal` turns every number into enums as it imports (3.3 M
    # instructions, 1% of a call through a keeper, issue 34), which nothing here needs.
    import _signal as signal

SIGNAL_EXIT_CODES: dict[int, int] = {
    signal.SIGINT: ExitCode.INTERRUPTED,
    signal.SIGTERM: ExitCode.TERMINATED,
    signal.SIGHUP: ExitCode.TERMINATED,
}

# How long the main thread sleeps at most in wait(): the longest a signal's handler may be delayed.
WAKE_SECONDS = 0.2

# The names of the signals handled here, for messages (signal.Signals(n).name, without the enum).
SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}

_requested = threading.Event()
_received: list[int] = []  # the first signal received, for the exit code
# Not empty once the command was interrupted: where a call to check() each time is too dear (a
# batch's every call), `if interrupts.received: ...check()`.
received: list[int] = _received


class _Depth(threading.local):
    """Per thread: how deep in deferred() (only the main thread's counts, where handlers run),
    and a signal that arrived inside. Class attributes are each thread's starting values, so
    reading them needs no getattr default."""

    depth = 0
    pending: int | None = None


_state = _Depth()


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by SIGINT, SIGTERM or SIGHUP. A KeyboardInterrupt, so every
    place that already unwinds cleanly on Ctrl-C (cancelling a request, a prompt) does so here."""

    def __init__(self, signum: int) -> None:
        super().__init__(SIGNAL_NAMES.get(signum, f"signal {signum}"))
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return SIGNAL_EXIT_CODES.get(self.signum, ExitCode.INTERRUPTED)


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP (main thread only; a signal the parent set to be ignored,
    as `nohup` does for SIGHUP, stays ignored)."""
    for signum in SIGNAL_EXIT_CODES:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _handle)


def wait(poll: Callable[[float], bool], timeout: float | None = None) -> bool:
    """Wait until `poll(seconds)` (an Event's wait, a Semaphore's acquire, ...) returns True, or
    `timeout` passes (None: no limit), in a way a signal always interrupts. CPython runs a signal's
    handler only when the main thread next executes bytecode: a signal the kernel hands to one of
    the other threads, or a wait the C library resumes by itself, leaves a long wait asleep (seen:
    a batch ignored SIGHUP while it waited 300 s for a call). So the main thread never sleeps more
    than WAKE_SECONDS at a time; the pending handler raises Interrupted when it wakes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = WAKE_SECONDS if deadline is None else min(WAKE_SECONDS, deadline - time.monotonic())
        if left <= 0:
            return False
        if poll(left):
            return True


@contextlib.contextmanager
def relayed_to_main_thread(signums: tuple[int, ...] = tuple(SIGNAL_EXIT_CODES)) -> Iterator[None]:
    """For a main thread blocked in a system call that no timeout can slice (reading a terminal,
    reading a server's input): a signal the kernel hands to another thread does not interrupt it,
    and CPython runs the handler only once the main thread runs again, after the person typed or
    the client wrote. Inside this block the C-level handler's wakeup fd, which gets the number of
    every signal whichever thread took it, is read by a relay thread that sends each signal once
    more to the main thread itself, whose system call then fails with EINTR and runs the handler.
    Once per signal number: the relayed signal reaches the wakeup fd too. Main thread only."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    main = threading.main_thread().ident
    assert main is not None

    def relay() -> None:
        relayed: set[int] = set()
        try:
            while data := os.read(read_end, 64):
                for signum in set(data) & set(signums) - relayed:
                    relayed.add(signum)
                    signal.pthread_kill(main, signum)
        finally:
            os.close(read_end)

    threading.Thread(target=relay, daemon=True, name="llmc-signal-relay").start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the relay reads end of file, closes its end and returns


def ignore_further() -> None:
    """For a process that was stopped by a signal and has cleaned up: ignore SIGINT, SIGTERM and
    SIGHUP from here to its exit. Until now its handlers ignored a repeated signal, but CPython
    puts back each handled signal's default action when the interpreter finalizes, so a second
    signal then (a supervisor repeating its stop, Ctrl-C pressed twice) killed the process by the
    signal instead of letting it exit with its own code. Called once nothing more is started:
    an ignored signal would be inherited by a child. Main thread only."""
    for signum in SIGNAL_EXIT_CODES:
        signal.signal(signum, signal.SIG_IGN)


def leaving() -> None:
    """A command ends: when a signal stopped it (and it has cleaned up), ignore the next ones."""
    if _requested.is_set():
        ignore_further()


# Whether the command was interrupted: the Event's own is_set (a batch asks twice a call: a
# function around it was a second Python call each time).
requested: Callable[[], bool] = _requested.is_set


def exit_code(default: int = ExitCode.INTERRUPTED) -> int:
    return SIGNAL_EXIT_CODES.get(_received[0], default) if _received else default


class _Deferred:
    """deferred()'s block. A class, not a generator: every audit append enters a few of these,
    and a generator context manager costs several times as much to enter and leave."""

    __slots__ = ()

    def __enter__(self) -> None:
        _state.depth += 1

    def __exit__(self, *exc: object) -> None:
        state = _state
        state.depth -= 1
        signum = state.pending
        if signum is not None and state.depth == 0:
            state.pending = None
            raise Interrupted(signum)


_DEFERRED = _Deferred()  # no state of its own (the depth is the thread's): one serves every block


def deferred() -> _Deferred:
    """A signal arriving inside is raised when the block ends, not in the middle of it."""
    return _DEFERRED


def _handle(signum: int, frame: object) -> None:
    if _requested.is_set():
        return  # already unwinding: the clean-up is bounded, let it finish
    _received.append(signum)
    _requested.set()
    if _state.depth:
        _state.pending = signum
        return
    raise Interrupted(signum)


def check() -> None:
    """Raise Interrupted (in any thread) when the command was interrupted: no new call starts."""
    if _received:
        raise Interrupted(_received[0])


def signal_name() -> str:
    return SIGNAL_NAMES.get(_received[0], f"signal {_received[0]}") if _received else "SIGINT"

"""`llmc serve --http ADDR --workers N`: the parent binds the listening socket, then forks N
worker processes that serve it (each a whole gateway: toolbox, upstreams, host sessions, on
uvicorn), and supervises them:

- SIGINT, SIGTERM or SIGHUP: every worker gets SIGTERM and drains as a single gateway does
  (listen streams get their `complete`, sessions end, upstream servers stop); the parent exits 0
  once all are gone, as one process does.
- A worker that dies after it served (a crash, SIGKILL, the OOM killer) is started again at once
  (at most once a second per worker), said on stderr; its host sessions are lost with it (or
  resumed from the state database when one is shared), as with a replica.
- A worker that ends before it served (an upstream that cannot be configured, a database that
  refuses) stops them all: the parent exits with that worker's exit code.

The parent runs no thread (forking a process with threads copies their locks in whatever state
they were) and starts no upstream: each worker builds its own toolbox after the fork. Why our own and not uvicorn's supervisor (uvicorn.supervisors
Multiprocess): that one spawns fresh interpreters that import the app by name (the gateway's
toolbox is built from a loaded profile, not importable), handles SIGINT/SIGTERM by its own rules
(no SIGHUP, and the workers re-raise the signal for a non-zero exit) and knows nothing of a
worker that never came up."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from llmc_cli import interrupts
from llmc_cli.errors import LlmcError

POLL_SECONDS = 0.2
RESTART_SECONDS = 1.0  # a worker is started again at most this often
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


class WorkerFailed(LlmcError):
    """A worker ended before it served: the gateway stops with that worker's exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code  # type: ignore[assignment]  # the worker's own, whichever it was


class _InChild(Exception):  # not an error: how a forked child leaves the parent's loop
    def __init__(self, index: int, first: bool, mask: set[int | signal.Signals]) -> None:
        super().__init__(index)
        self.index, self.first, self.mask = index, first, mask


class Supervisor:
    """The parent's side: the workers by pid, which of them said they serve, when to restart."""

    def __init__(self, count: int, log: Callable[[str], None]) -> None:
        self.count, self.log = count, log
        self.children: dict[int, int] = {}  # pid -> worker index
        self.serving: set[int] = set()  # pids that said they serve
        self.started: dict[int, float] = {}  # worker index -> when its current process started
        self.due: dict[int, float] = {}  # worker index -> when to start it again
        self.stopping = False
        self.failed: WorkerFailed | None = None
        self.announced = False
        self.ready_r, self.ready_w = os.pipe()
        self.waiting = select.poll()  # poll(2): select(2) cannot watch a descriptor numbered past 1024
        self.waiting.register(self.ready_r, select.POLLIN)
        self.pending = b""

    def stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """Drain every worker (once: a repeated signal changes nothing)."""
        if self.stopping:
            return
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def spawn(self, index: int, first: bool) -> None:
        """Fork worker `index`. The stop signals wait meanwhile: a child must not run the
        parent's handler (which would stop its siblings) before it has its own."""
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, list(interrupts.SIGNAL_EXIT_CODES))
        try:
            pid = os.fork()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if pid == 0:
            raise _InChild(index, first, mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.children[pid] = index
        self.started[index] = time.monotonic()

    def ready(self) -> None:
        """Take the pids of workers that now serve from the pipe (nothing waits)."""
        while self.waiting.poll(0):
            data = os.read(self.ready_r, 4096)
            if not data:
                break
            self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        self.serving.update(int(line) for line in lines if line.isdigit())
        if not self.announced and len(self.serving & set(self.children)) == self.count:
            self.announced = True
            self.log(f"{self.count} workers serving (pids {', '.join(str(pid) for pid in sorted(self.children))})")

    def reap(self) -> None:
        """Collect workers that ended: start again one that had served, stop all for one that
        had not."""
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            index = self.children.pop(pid, None)
            if index is None:
                continue
            # The pid reaches the pipe before the worker can end: read what came since the last
            # look, or a worker that said it serves and ended in between would count as one that
            # never served (and stop the gateway).
            self.ready()
            served = pid in self.serving
            self.serving.discard(pid)
            if self.stopping:
                continue
            how = _how(status)
            if not served:
                code = os.waitstatus_to_exitcode(status)
                self.failed = WorkerFailed(f"worker {index} {how} before it served: the gateway stops", code if code > 0 else 1)
                self.stop()
                continue
            self.log(f"worker {index} (pid {pid}) {how}; starting it again (its host sessions are lost)")
            self.due[index] = self.started.get(index, 0.0) + RESTART_SECONDS

    def restart_due(self) -> None:
        now = time.monotonic()
        for index, when in sorted(self.due.items()):
            if when <= now and not self.stopping:
                del self.due[index]
                self.spawn(index, first=False)


def _end_with(parent: int) -> None:
    """In a worker: SIGTERM (a drain, as from the supervisor) when the supervisor dies without
    stopping it (SIGKILL, the OOM killer), so no worker serves on orphaned, holding the port and
    its upstreams. Linux's parent-death signal; checked once after, for a parent that died
    before it was set."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _how(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def supervise(count: int, worker: Callable[[int, bool, Callable[[], None]], None], log: Callable[[str], None]) -> None:
    """Run `count` workers until a signal stops them. In each forked child this returns once
    `worker(index, first, ready)` returned (the child then ends as a single gateway does);
    `ready()` tells the parent the worker serves. In the parent it returns when every worker
    has ended; WorkerFailed when one ended before it served."""
    if threading.active_count() > 1:  # a thread's held lock would stay held in every child
        log("warning: forking workers while threads run: " + ", ".join(t.name for t in threading.enumerate()))
    supervisor = Supervisor(count, log)
    parent = os.getpid()
    saved = {signum: signal.signal(signum, supervisor.stop) for signum in interrupts.SIGNAL_EXIT_CODES}
    try:
        for index in range(count):
            supervisor.spawn(index, first=True)
        while supervisor.children or (supervisor.due and not supervisor.stopping):
            with contextlib.suppress(InterruptedError):
                supervisor.waiting.poll(POLL_SECONDS * 1000)
            supervisor.ready()
            supervisor.reap()
            supervisor.restart_due()
    except _InChild as child:
        for signum, handler in saved.items():  # the worker's own handlers come with its server
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, child.mask)
        _end_with(parent)
        os.close(supervisor.ready_r)
        ready_w = supervisor.ready_w

        def ready() -> None:
            os.write(ready_w, b"%d\n" % os.getpid())
            os.close(ready_w)

        worker(child.index, child.first, ready)
        return
    os.close(supervisor.ready_r)
    os.close(supervisor.ready_w)
    interrupts.ignore_further()  # a storm of signals: the first one stopped it
    if supervisor.failed is not None:
        raise supervisor.failed

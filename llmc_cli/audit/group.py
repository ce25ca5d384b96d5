"""Group commit of a chain's appends within one process (audit/trail.py uses it).

Threads that append at once (the gateway's hosts, a batch's flusher beside its calls) queue
their seals; the first of them leads: it takes the store's lock once, seals every queued append
in queue order (each chained after the one before), writes them in one go, makes them durable
once (one fsync of the log, one anchor update) and wakes the others, each of which returns only
then, with its own records on disk, or with the group's AuditError. Appends that arrived while
a group was being written form the next group, led by the one that waited longest, so a caller
never writes more than the groups up to its own. The chain's order is the queue's order.

A lone appender leads at once, in its own thread: no thread hop, no system call beyond the
store's own (two uncontended lock operations on the queue's mutex). Appends are grouped by
queue: an AuditLog shares one queue per file among its instances in the process, so two of them
on one file wait for each other here instead of polling the file lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from llmc_cli import interrupts
from llmc_cli.audit.records import AuditError

Seal = Callable[[str, int], list[bytes]]  # (head, count) -> the sealed records as UTF-8 JSON lines

WAIT_SECONDS = 120.0  # a follower's longest wait: a leader stuck on a dead disk (the lock's own wait is 30 s)


class Ticket:
    """One append waiting in a queue: its seal, whether its anchor may wait (`later`), the
    log it is written for (whose anchor state the leader updates), and how it ended."""

    __slots__ = ("done", "error", "later", "lead", "owner", "seal", "waiter")

    def __init__(self, seal: Seal, later: bool, owner: Any) -> None:
        self.seal = seal
        self.later = later
        self.owner = owner
        self.waiter: Any = None  # a held lock, released when written or when this one leads
        self.lead = False  # handed the next group to write
        self.done = False
        self.error: BaseException | None = None


class Queue:
    """The appends of one store in this process (see the module's docstring)."""

    __slots__ = ("busy", "mutex", "waiting")

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.waiting: list[Ticket] = []
        self.busy = False  # a leader is writing a group

    def append(self, ticket: Ticket, write: Callable[[list[Ticket]], None]) -> None:
        """Queue `ticket`; return once it is written (by this thread or a leader's), raise the
        error its group got. `write(group)` writes a group under the store's lock."""
        with self.mutex:
            self.waiting.append(ticket)
            if self.busy:
                ticket.waiter = threading.Lock()
                ticket.waiter.acquire()
            else:
                self.busy = True
        if ticket.waiter is not None:
            self._wait(ticket)
        if not ticket.done:
            self._lead(ticket, write)
        if ticket.error is not None:
            raise ticket.error

    def _wait(self, ticket: Ticket) -> None:
        """Until a leader wrote `ticket` or handed it the next group. Interrupted, or out of
        time, before a leader took it: out of the queue (passing on a turn it was handed)."""
        try:
            woken = ticket.waiter.acquire(timeout=WAIT_SECONDS)
        except BaseException:  # interrupted: the interruption goes on
            self._leave(ticket)
            raise
        if not woken and not self._leave(ticket):
            raise AuditError(f"the audit write waited {WAIT_SECONDS:.0f} s for another thread's; no call was run")

    def _leave(self, ticket: Ticket) -> bool:
        """Take a waiting ticket out of the queue; True when it was written meanwhile."""
        with self.mutex:
            if ticket in self.waiting:
                self.waiting.remove(ticket)
                if ticket.lead:  # handed the next group: the next in line writes it
                    self._hand_on()
                return False
            return ticket.done

    def _lead(self, ticket: Ticket, write: Callable[[list[Ticket]], None]) -> None:
        """Write every queued ticket as one group; then hand on to the one that waited longest.
        A signal arriving meanwhile is raised once every ticket knows how its group ended (a
        group written whole is not reported failed because the leader was interrupted after)."""
        with self.mutex:
            group, self.waiting = self.waiting, []
        error: BaseException | None = None
        with interrupts.deferred():
            try:
                write(group)
            except AuditError as exc:
                error = exc
            except BaseException:  # nobody may wait forever for this write
                error = AuditError("the audit write was interrupted; no call was run")
                raise
            finally:
                with self.mutex:
                    for waiting in group:
                        waiting.done, waiting.error = True, error
                        if waiting is not ticket and waiting.waiter is not None:
                            waiting.waiter.release()
                    self._hand_on()

    def _hand_on(self) -> None:
        """Under the mutex: the longest waiting leads the next group, if any."""
        if self.waiting:
            first = self.waiting[0]
            first.lead = True
            first.waiter.release()
        else:
            self.busy = False


_queues: dict[str, Queue] = {}
_queues_lock = threading.Lock()


def queue_of(key: str) -> Queue:
    """The process's queue for `key` (a log file's path)."""
    queue = _queues.get(key)
    if queue is None:
        with _queues_lock:
            queue = _queues.setdefault(key, Queue())
    return queue


def head_of(line: bytes) -> str:
    """The hash of a sealed line (trail.sealer writes it last: `...,"hash":"<64 hex>"}`)."""
    if line.endswith(b'"}') and line[-75:-66] == b',"hash":"':
        return line[-66:-2].decode("ascii")
    return str(json.loads(line)["hash"])

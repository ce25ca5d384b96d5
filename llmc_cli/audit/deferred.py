"""Deferred writing of a batch's audit records: decisions on disk at once, outcomes grouped."""

from __future__ import annotations

import threading
import time

from llmc_cli.audit.records import AuditError, iso_times
from llmc_cli.audit.trail import ChainedLog
from llmc_cli.store.chain import AuditRecord


class Deferred:
    """The audit trail of a batch (a context manager, and an AuditSink in front of the log). Records written before an action
    (decisions) go to disk at once, as always, taking every waiting outcome with them in the
    same write and fsync; outcome records wait in memory for at most FLUSH_RECORDS records or
    FLUSH_SECONDS, keeping the time they were recorded at, and are written by a background
    thread (inside the context), so a call never waits for another's outcome fsync. Leaving the
    context writes what is left. The log's anchor is made durable by the same flush (lazy_anchor),
    so a decision costs one fsync, the record's own; a flush is one lock hold (the records'
    write and fsync, the anchor's write and fsync).

    The time bound is what keeps outcomes close behind their calls; the count bound caps the
    memory a fast batch holds (~600 bytes a record; the arguments are the decision's, shared),
    and FLUSH_RESULT_BYTES the results the records carry with [audit] results on. Each group costs two fsyncs (~0.2 ms of CPU
    each here) and a lock hold: at 64 records a 1,000-call batch made 16 groups and its flusher
    spent ~25 ms of CPU, at 1,024 it makes two and spends ~8 ms (bench/RESULTS.md, session 8)."""

    FLUSH_RECORDS = 1024
    FLUSH_RESULT_BYTES = 8 * 1024 * 1024  # results waiting in outcome records ([audit] results)
    FLUSH_SECONDS = 1.0

    def __init__(self, log: ChainedLog) -> None:

        self.log = log
        log.lazy_anchor = True  # flush() syncs it, at least every second: one fsync per write, not three
        # The outcomes waiting and, apart, when each was recorded: the record is copied once,
        # when it is sealed (trail.sealer), not also here to add its time; the time as
        # time.time_ns() gives it, its text made for all of them when they are written.
        self.pending: list[AuditRecord] = []
        self.times: list[int] = []
        self.pending_results = 0  # the bytes of the results in `pending` (their resultBytes)
        self.lock = threading.Lock()  # held by a flush (the background thread's, the last one's)
        # Guards `pending` only, never held across a write: an outcome recorded while a write and
        # fsync runs does not wait for it.
        self.queue_lock = threading.Lock()
        self.closed = threading.Event()
        self.full = threading.Event()  # a group is full (FLUSH_RECORDS, FLUSH_RESULT_BYTES): the flusher writes it now
        self.flusher = threading.Thread(target=self._flush_every_second, daemon=True, name="llmc-audit-flush")

    def __enter__(self) -> Deferred:
        self.flusher.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.closed.set()
        self.full.set()
        self.flusher.join(timeout=self.FLUSH_SECONDS * 2)
        self.flush()

    def record(self, record: AuditRecord, *, before_action: bool) -> None:
        if before_action:
            self.record_before_actions([record])
            return
        size = _result_bytes(record) if "result" in record else 0  # ([audit] results) no call for the rest
        lock = self.queue_lock  # (acquire and release, not `with`: see mcp/inflight.InFlight.open; a call each)
        lock.acquire()
        try:
            pending = self.pending
            pending.append(record)
            self.times.append(time.time_ns())
            if size:
                self.pending_results += size
            full = len(pending) >= self.FLUSH_RECORDS or self.pending_results >= self.FLUSH_RESULT_BYTES
        finally:
            lock.release()
        if full and self.flusher.is_alive():
            # The write and its fsync happen beside the calls, not in one of them: in the calling
            # thread they would be a large share of a long batch's time.
            self.full.set()
        elif full:  # not entered: no background thread, the caller writes
            with self.lock:
                self._write([])

    def record_before_actions(self, records: list[AuditRecord]) -> None:
        """On disk before this returns, with every outcome waiting. Concurrent callers (the
        gateway's hosts) share writes: the log groups appends made at once (audit/group.py)."""
        self._write(records)

    def mark(self) -> int:
        return self.log.mark()

    def settle(self, mark: int) -> None:
        self.log.settle(mark)

    def flush(self) -> None:
        """Every waiting outcome written and the anchor durable: one lock hold, the records'
        fsync and the anchor's (sync() only when nothing waited: an anchor a decision left)."""
        with self.lock:
            if not self._write([], durable=True):
                self.log.sync()

    def _flush_every_second(self) -> None:
        while not self.closed.is_set():
            self.full.wait(self.FLUSH_SECONDS)  # a second passed, or a group is full
            self.full.clear()
            if self.closed.is_set():
                return  # __exit__ writes what is left
            try:
                self.flush()
            except AuditError:
                pass  # the records stay pending; the next decision or the final flush reports it

    def _write(self, records: list[AuditRecord], *, durable: bool = False) -> bool:
        """The pending outcomes and `records` in one append (decisions' appends run at once:
        the log groups them), the anchor made durable with them when `durable`; whether there
        was anything to write."""
        with self.queue_lock:
            pending, self.pending = self.pending, []
            times, self.times = self.times, []
            taken, self.pending_results = self.pending_results, 0
        if not (pending or records):
            return False
        try:
            self.log.append_many([*pending, *records], durable=durable, times=iso_times(times), kept=False)
        except AuditError as exc:
            # The pending records stay: the next write (or the final flush) takes them.
            with self.queue_lock:
                self.pending[:0] = pending
                self.times[:0] = times
                self.pending_results += taken
            ran = f"{len(pending)} outcome records of calls that ran are not written yet"
            raise AuditError(
                f"{exc.message}; "
                + (f"no call was run ({ran})" if records and pending else "no call was run" if records else ran)
            ) from None
        return True


def _result_bytes(record: AuditRecord) -> int:
    """The size of the result an outcome record carries ([audit] results), else 0."""
    if "result" not in record:
        return 0
    size = record.get("resultBytes")
    return size if isinstance(size, int) else 0

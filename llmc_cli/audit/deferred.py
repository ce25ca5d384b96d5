"""Deferred writing of a batch's audit records: decisions on disk at once, outcomes grouped."""

from __future__ import annotations

from typing import Any

from llmc_cli.audit.trail import ChainedLog
from llmc_cli.audit.records import AuditError, now_iso
from llmc_cli.store.chain import AuditRecord


class Deferred:
    """The audit trail of a batch (a context manager, and an AuditSink in front of the log). Records written before an action
    (decisions) go to disk at once, as always, taking every waiting outcome with them in the
    same write and fsync; outcome records wait in memory for at most FLUSH_RECORDS records or
    FLUSH_SECONDS (a background flush), keeping the time they were recorded at. Leaving the
    context writes what is left."""

    FLUSH_RECORDS = 64
    FLUSH_SECONDS = 1.0

    def __init__(self, log: ChainedLog) -> None:
        import threading

        self.log = log
        self.pending: list[AuditRecord] = []
        self.lock = threading.Lock()  # one batch runs servers in threads; the gateway serves hosts in threads
        self.queue_lock = threading.Lock()
        self.queued: list[dict[str, Any]] = []  # decision records waiting for the next write
        self.closed = threading.Event()
        self.flusher = threading.Thread(target=self._flush_every_second, daemon=True, name="llmc-audit-flush")

    def __enter__(self) -> "Deferred":
        self.flusher.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.closed.set()
        self.flusher.join(timeout=self.FLUSH_SECONDS * 2)
        self.flush()

    def record(self, record: AuditRecord, *, before_action: bool) -> None:
        if before_action:
            self.record_before_actions([record])
            return
        with self.lock:
            self.pending.append({"time": now_iso(), **record})
            if len(self.pending) >= self.FLUSH_RECORDS:
                self._write([])

    def record_before_actions(self, records: list[AuditRecord]) -> None:
        """On disk before this returns. Concurrent callers (the gateway's hosts) share writes:
        while one write+fsync runs, the others queue, and the next writer takes every queued
        record in one write (group commit); each caller still returns only once its own are on disk."""
        import threading

        ticket: dict[str, Any] = {"records": records, "done": threading.Event(), "error": None}
        with self.queue_lock:
            self.queued.append(ticket)
        with self.lock:
            if not ticket["done"].is_set():
                with self.queue_lock:
                    batch, self.queued = self.queued, []
                try:
                    self._write([r for t in batch for r in t["records"]])
                except AuditError as exc:
                    for t in batch:
                        t["error"] = exc
                    raise
                finally:
                    for t in batch:
                        t["done"].set()
        if ticket["error"] is not None:
            raise ticket["error"]

    def flush(self) -> None:
        with self.lock:
            self._write([])

    def _flush_every_second(self) -> None:
        while not self.closed.wait(self.FLUSH_SECONDS):
            try:
                self.flush()
            except AuditError:
                pass  # the records stay pending; the next decision or the final flush reports it

    def _write(self, records: list[AuditRecord]) -> None:
        if self.pending or records:
            try:
                self.log.append_many([*self.pending, *records])
            except AuditError as exc:
                # The pending records stay: the next write (or the final flush) takes them.
                ran = f"{len(self.pending)} outcome records of calls that ran are not written yet"
                raise AuditError(f"{exc.message}; " + (f"no call was run ({ran})" if records and self.pending else
                                                       "no call was run" if records else ran)) from None
            self.pending = []

"""What the two stores of the chain share (audit/log.py: the JSON Lines file; audit/postgres.py:
PostgreSQL): sealing records into the chain, writing as an AuditSink, and verify."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

from llmc_cli import telemetry
from llmc_cli.audit import group
from llmc_cli.audit.group import Seal, Ticket
from llmc_cli.audit.records import AnchorDamaged, AuditError, now_iso, record_hash
from llmc_cli.mcp.jsonrpc import replace_lone_surrogates
from llmc_cli.model import (
    _SCALARS,
    EVERYTHING,
    _canonical_bytes,
    _orjson,
    canonical_json_bytes,
    canonical_json_bytes_encoder,
    sha256_of,
)
from llmc_cli.store.chain import GENESIS, AuditRecord

# Seal: seal(head, count) -> the new records as JSON lines (UTF-8 bytes), each chained to the one before, the
# first to `head`; the store calls it under its lock (PostgreSQL: again when a transaction is retried).
__all__ = ["ChainedLog", "Seal", "sealer"]


# The fields of an AuditRecord (store/chain.py) that can be a float or hold one: what came from
# outside (a call's arguments, its result, the MCP host's clientInfo, the inspectors' findings)
# and durationMs, llmc's own (an elapsed time rounded to 0.1 ms: written alike by json and
# orjson). Every other field is declared str, int or str | None (tests/audit/test_seal_encoding.py
# holds the lists together). A record's arguments are the part model.canonical_json_bytes checks
# for a float that orjson writes otherwise than json; with any of the rest, the whole record.
FOREIGN_FIELDS = ("arguments", "client", "findings", "result")


def sealer(records: list[AuditRecord], written: list[dict[str, Any]] | None, times: Sequence[str] = ()) -> Seal:
    """The Seal that chains `records` after a head; `written` gets them as stored (None: nobody
    reads them, none is kept). `times[i]` is when records[i] was recorded (one that waited:
    audit.Deferred); a record past them is stamped when sealed, unless it carries its own time
    (which is kept, as for every record)."""

    def seal(prev: str, count: int) -> list[bytes]:
        if written is not None:
            written.clear()  # sealed again when the store retries
        lines = []
        new = sha256_of()  # SHA-256's constructor itself, not a call around it per record
        encode = canonical_json_bytes_encoder()  # likewise canonical_json_bytes's encoder
        # Once it is orjson's, orjson's dumps itself for a record whose foreign part is its
        # arguments holding only text, integers, booleans and nulls (a batch's every record):
        # the bytes encode returns for it, without its call (~1,500 instructions a record).
        fast = None if encode is _canonical_bytes else _orjson(True)
        dumps, option = (fast[0], fast[2]) if fast is not None else (None, 0)
        scalars = _SCALARS
        # Each record's time, paired with it (not looked up by index): the times it waited
        # with, then when this seal stamps the rest (once: they are written in one go).
        rest = len(records) - len(times)
        for record, when in zip(records, [*times, *repeat(now_iso(), rest)] if rest > 0 else times, strict=False):
            # One copy of the record (a Deferred keeps the record and its time apart rather than
            # copying it a second time to add the time), then its time (its own, if it has one)
            # and prev: a dict built as {"time": ..., **record, "prev": ...} grows and is resized
            # as it is filled (~4,000 instructions a record more). The keys' order is no part of
            # what is stored (sorted).
            full: dict[str, Any] = record.copy()  # type: ignore[assignment]  # a TypedDict's copy, made one to add to
            if "time" not in full:
                full["time"] = when
            full["prev"] = prev
            # Three lookups, not a set operation over the record's keys (twice the instructions).
            rare = "result" in full or "client" in full or "findings" in full
            foreign = EVERYTHING if rare else full.get("arguments")
            try:  # what record_hash(full) hashes, as bytes: hashed and stored as they are
                body = None
                # no float in the arguments (the rest is llmc's own): orjson's bytes are json's
                if (
                    dumps is not None
                    and not rare
                    and (foreign is None or (type(foreign) is dict and scalars.issuperset(map(type, foreign.values()))))
                ):
                    try:
                        body = dumps(full, None, option)
                    except TypeError:  # (orjson's JSONEncodeError: a lone surrogate, a huge integer) json decides
                        pass
                if body is None:
                    body = encode(full, foreign)
            except UnicodeEncodeError:  # a lone surrogate: replaced, as everywhere llmc stores text
                full = replace_lone_surrogates(full)
                body = canonical_json_bytes(full)
            prev = new(body).hexdigest()
            if written is not None:
                full["hash"] = prev
                written.append(full)
            # Stored as hashed, its hash last: one serialisation per record, not a second compact
            # one in another key order (verify parses the line; the order of keys is no part of it).
            lines.append(b"".join((body[:-1], b',"hash":"', prev.encode(), b'"}')))
        return lines

    return seal


def _chained(seals: list[Seal]) -> Seal:
    """One seal of a group's: each seal's records chained after the one before's."""

    def seal(prev: str, count: int) -> list[bytes]:
        lines: list[bytes] = []
        for part in seals:
            sealed = part(prev, count)
            if sealed:
                prev, count = group.head_of(sealed[-1]), count + len(sealed)
                lines += sealed
        return lines

    return seal


class ChainedLog:
    """A hash chain of audit records in some store. A subclass says where records go
    (_append_chained) and how they are read back (anchor, head, files, records)."""

    path: Path  # shown in messages and reports (the database's name for PostgreSQL)

    @property
    def anchor_path(self) -> Path:
        raise NotImplementedError

    def _append_chained(self, seal: Seal, anchor_later: bool = False) -> None:
        """Under the store's lock: read the head, write seal(head, count) after it, move the head.
        `anchor_later`: the records are durable when this returns, the head's anchor (where the
        store keeps one apart) may wait for the next append or sync(). Called by one thread at
        a time per queue (_appends), with a group's seals made one."""
        raise NotImplementedError

    _appends: group.Queue | None = None  # where this process's appends to the store queue up (audit/group.py)
    _anchor_synced = True  # no anchor written since the last durable one (a store with an anchor apart)

    def _queue(self) -> group.Queue:
        if self._appends is None:
            with group._queues_lock:
                if self._appends is None:
                    self._appends = group.Queue()
        return self._appends

    def _write_group(self, tickets: list[Ticket]) -> None:
        """The leader's write of a group (group.Queue): one append under the store's lock, the
        anchor durable unless every append in it may leave it for later."""
        later = all(t.later for t in tickets)
        self._append_chained(tickets[0].seal if len(tickets) == 1 else _chained([t.seal for t in tickets]), later)
        for ticket in tickets:
            ticket.owner._anchor_synced = not later

    def anchor(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def head(self) -> dict[str, Any]:
        raise NotImplementedError

    def files(self) -> list[Path]:
        raise NotImplementedError

    def records(self) -> Iterator[tuple[Path, int, str]]:
        raise NotImplementedError

    # Set by a writer that calls sync() at least every second (audit.Deferred): the store may then
    # make its anchor durable in sync() rather than with every append.
    lazy_anchor = False

    def sync(self) -> None:
        """Make durable what appends left for later (lazy_anchor); nothing for most stores."""

    def mark(self) -> int:
        """The appends so far, for settle(): 0 where every append is durable when it returns."""
        return 0

    def settle(self, mark: int) -> None:
        """Appends up to `mark` durable ([audit] sync = "before_reply", audit/log.py)."""

    # -- writing -----------------------------------------------------------------------------------

    def append_many(
        self,
        records: list[AuditRecord],
        *,
        anchor_later: bool = False,
        durable: bool = False,
        times: Sequence[str] = (),
        kept: bool = True,
    ) -> list[dict[str, Any]]:
        """Chain `records` after the head and store them in one write; the records as stored
        (`kept`; else [], and none is kept past its line unless telemetry sends it: a batch's
        writers discard them). `durable`: the anchor too is made durable in the same lock hold,
        whatever lazy_anchor says (what sync() would do in a second one: audit.Deferred's
        flush). `times`: when the first len(times) records were recorded (sealer)."""
        sending = telemetry.enabled()  # asked once an append, not once a record
        written: list[dict[str, Any]] | None = [] if kept or sending else None
        later = not durable and (anchor_later or self.lazy_anchor)
        self._queue().append(Ticket(sealer(records, written, times), later, self), self._write_group)
        if written is None:
            return []
        if sending:
            for full in written:  # stored: now they may also leave as OTLP log records ([telemetry] audit_logs)
                telemetry.audit_record(full)
        return written

    def append(self, record: AuditRecord) -> dict[str, Any]:
        return self.append_many([record])[-1]

    def record(self, record: AuditRecord, *, before_action: bool) -> None:
        """What call_tool writes through (AuditSink): every record stored at once (see Deferred)."""
        if before_action:
            self.record_before_actions([record])
            return
        try:
            self.append(record)
        except AuditError as exc:
            raise AuditError(f"{exc.message}; the call ran, but its outcome is not recorded") from None

    def record_before_actions(self, records: list[AuditRecord]) -> None:
        """The records on disk before this returns. When all are "allow" decisions, the anchor
        is made durable with their outcome records instead (one fsync fewer per call): each such
        call gets an outcome record, appended with a durable anchor before its result is shown
        (pipeline._through; an interruption's or an abandoned call's outcome likewise), and until
        then a crash of the machine leaves at most an anchor that lags the fsynced log, which
        verify accepts. A denial is all the user hears of its call: its anchor is durable at once."""
        later = all(r.get("event") == "decision" and r.get("decision") == "allow" for r in records)
        try:
            self.append_many(records, anchor_later=later, kept=False)
        except AuditError as exc:
            raise AuditError(f"{exc.message}; the tool was not run") from None

    def flush(self) -> None:
        """Nothing waits: every record was stored when it was written."""

    def release(self) -> None:
        """Let go of what is kept open between appends (a file log's descriptors); the next
        append opens anew. Called when its command or group ends, so an exception's traceback
        that keeps this object alive does not keep files open until the collector runs."""

    # -- checking ----------------------------------------------------------------------------------

    def verify(self, expect: str | None = None) -> dict[str, Any]:
        """Walk the chain; then compare with the anchor (its head must be the record at its count:
        records appended after it are fine, a chain cut or rewritten before it is not), and with
        `expect`, a head recorded elsewhere (it must be somewhere in the chain)."""
        damaged = False
        try:
            anchor = self.anchor()  # read first: appends during the walk only add records after it
        except AnchorDamaged:
            anchor, damaged = None, True
        prev, count, anchored, expected = GENESIS, 0, anchor is not None and anchor["records"] == 0, None
        for path, number, line in self.records():
            where = {"file": str(path), "line": number}
            try:
                record = json.loads(line)
                stored = record["hash"]
            except (ValueError, KeyError, TypeError):
                return {"ok": False, "records": count, **where, "reason": "not a valid audit record"}
            if record.get("prev") != prev:
                return {
                    "ok": False,
                    "records": count,
                    **where,
                    "reason": "broken link: a record before this one was removed, added or reordered",
                }
            if record_hash(record) != stored:
                return {"ok": False, "records": count, **where, "reason": "record was modified (hash mismatch)"}
            prev, count = stored, count + 1
            if anchor is not None and count == anchor["records"]:
                if stored != anchor["head"]:
                    return {
                        "ok": False,
                        "records": count,
                        **where,
                        "reason": "the chain differs from its anchor: rewritten from this record back",
                    }
                anchored = True
            if expect is not None and stored == expect:
                expected = where
        report: dict[str, Any] = {
            "ok": True,
            "records": count,
            "files": [str(p) for p in self.files()],
            "last": prev,
            "anchor": anchor and {"head": anchor["head"], "records": anchor["records"]},
        }
        where = {"file": str(self.path), "line": None}
        if damaged:
            return {
                **report,
                "ok": False,
                "file": str(self.anchor_path),
                "line": None,
                "reason": "the anchor is damaged (not what llmc writes): the end of the log cannot be checked "
                "and nothing more is recorded; the chain verifies up to its last record: keep a copy of both "
                "files, then delete the anchor (the next recorded call writes a new one)",
            }
        if anchor is None and count:
            return {
                **report,
                "ok": False,
                **where,
                "reason": f"no anchor ({self.anchor_path}): the end of the log "
                "cannot be checked (it is deleted, or the log was written before llmc kept one; "
                "the next recorded call writes it)",
            }
        if anchor is not None and not anchored:
            what = "the audit log is missing" if not self.files() else "the log ends before its anchor"
            return {
                **report,
                "ok": False,
                **where,
                "reason": f"{what}: the anchor counts {anchor['records']} records, the log has {count} "
                "(records were cut off or deleted)",
            }
        if expect is not None:
            report["expect"] = expect
            if expected is None and expect != GENESIS:
                return {
                    **report,
                    "ok": False,
                    **where,
                    "reason": f"the expected head {expect} is not in the chain (records were cut off, "
                    "deleted or rewritten after it was recorded)",
                }
        return report

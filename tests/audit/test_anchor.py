"""The anchor beside the log (head hash + record count, 0600, replaced with every append): what
`audit verify` finds with it, what `audit head` and `verify --expect` add, and rotation."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from llmc_cli.audit import AuditLog, record_hash
from tests.helpers import llmc


def counted_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """os.fsync and os.fdatasync (the log's appends and anchor updates) still sync, and each
    descriptor either syncs is appended to the returned list."""
    synced: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda fd, real=real: (synced.append(fd), real(fd))[1])
    return synced


def fill(path: Path, count: int = 10, max_bytes: int = 16 * 1024 * 1024) -> AuditLog:
    log = AuditLog(path, max_bytes=max_bytes)
    for i in range(count):
        log.append({"event": "outcome", "n": i})
    return log


def cut_end(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-3]))


def delete_log(path: Path) -> None:
    path.unlink()


def rewrite_from_line_5(path: Path) -> None:
    """A valid chain again from record 5 on, with other content: only the anchor knows."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    prev = records[3]["hash"]
    for record in records[4:]:
        record["n"] = -1
        record["prev"] = prev
        record["hash"] = prev = record_hash(record)
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))


def rewrite_shorter(path: Path) -> None:
    rewrite_from_line_5(path)
    cut_end(path)


def delete_anchor(path: Path) -> None:
    path.with_name(path.name + ".anchor").unlink()


# tampering -> what verify says
TAMPERING: dict[str, tuple[Callable[[Path], None], str]] = {
    "end cut off": (cut_end, "ends before its anchor"),
    "log deleted": (delete_log, "audit log is missing"),
    "rewritten from a point on": (rewrite_from_line_5, "differs from its anchor"),
    "rewritten and shortened": (rewrite_shorter, "ends before its anchor"),
    "anchor deleted": (delete_anchor, "no anchor"),
}


@pytest.mark.parametrize("name", TAMPERING)
def test_verify_finds_what_the_chain_alone_cannot(tmp_path, name):
    tamper, says = TAMPERING[name]
    path = tmp_path / "audit.jsonl"
    fill(path)
    assert AuditLog(path).verify()["ok"]
    tamper(path)
    report = AuditLog(path).verify()
    assert report["ok"] is False and says in report["reason"], report


@pytest.mark.parametrize("name", ["end cut off", "log deleted"])
def test_a_later_append_does_not_hide_records_cut_off(tmp_path, name):
    path = tmp_path / "audit.jsonl"
    fill(path)
    TAMPERING[name][0](path)
    fill(path, 2)  # another process appends afterwards
    assert AuditLog(path).verify()["ok"] is False


def test_the_anchor_is_private_and_follows_rotation(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = fill(path, 60, max_bytes=2000)
    assert len(log.files()) > 3
    anchor = path.with_name("audit.jsonl.anchor")
    assert stat.S_IMODE(anchor.stat().st_mode) == 0o600
    assert json.loads(anchor.read_text())["records"] == 60
    report = AuditLog(path).verify()
    assert report["ok"] and report["records"] == 60 and report["anchor"]["head"] == report["last"]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_log_from_before_anchors_gets_one_on_its_next_append(tmp_path):
    path = tmp_path / "audit.jsonl"
    fill(path)
    delete_anchor(path)
    fill(path, 1)
    report = AuditLog(path).verify()
    assert report["ok"] and report["records"] == 11


def test_audit_head_and_verify_expect_through_the_cli(isolated_dirs):
    path = isolated_dirs / "state" / "audit.jsonl"
    empty = json.loads(llmc("audit", "head").stdout)
    assert empty["records"] == 0 and llmc("audit", "verify", "--expect", empty["head"]).returncode == 0
    fill(path, 5)
    head = json.loads(llmc("audit", "head").stdout)
    assert head["records"] == 5 and head["head"] == json.loads(path.read_text().splitlines()[-1])["hash"]
    fill(path, 3)
    assert llmc("audit", "verify", "--expect", head["head"]).returncode == 0  # still in the chain
    # The log AND its anchor rewritten from record 2 on: only the head kept elsewhere tells.
    records = [json.loads(line) for line in path.read_text().splitlines()][:2]
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))
    delete_anchor(path)
    fill(path, 6)
    assert llmc("audit", "verify").returncode == 0
    proc = llmc("audit", "verify", "--expect", head["head"])
    assert proc.returncode == 1 and "expected head" in proc.stderr


def test_audit_head_without_an_anchor_says_so(isolated_dirs):
    path = isolated_dirs / "state" / "audit.jsonl"
    fill(path, 2)
    delete_anchor(path)
    proc = llmc("audit", "head")
    assert proc.returncode == 3 and "no anchor" in proc.stderr and proc.stdout == ""


def test_under_a_deferred_writer_the_anchor_still_follows_every_write(tmp_path):
    """audit.Deferred (a batch, the gateway) leaves the anchor's fsyncs to its flush; the anchor is
    replaced with every write all the same, so a cut-off end is found at any moment, and an
    anchor behind the log (a crash before the flush made it durable) is no finding."""
    from llmc_cli.audit import Deferred

    path = tmp_path / "audit.jsonl"
    anchor = path.with_name("audit.jsonl.anchor")
    with Deferred(AuditLog(path)) as deferred:
        deferred.record_before_actions([{"event": "decision", "n": 1}, {"event": "decision", "n": 2}])
        assert json.loads(anchor.read_text())["records"] == 2  # written with the decisions
        behind = anchor.read_text()
        deferred.record({"event": "outcome", "n": 1}, before_action=False)
        deferred.record_before_actions([{"event": "decision", "n": 3}])
        assert json.loads(anchor.read_text())["records"] == 4  # the waiting outcome went with it
    assert AuditLog(path).verify()["ok"] and json.loads(anchor.read_text())["records"] == 4
    anchor.write_text(behind)  # what a crash before the flush may leave
    report = AuditLog(path).verify()
    assert report["ok"] and report["records"] == 4
    cut_end(path)  # 1 record left, the anchor (behind or not) counts more
    assert AuditLog(path).verify()["ok"] is False


def test_a_reader_waits_for_the_record_being_written_and_sees_a_torn_one_as_damage(tmp_path):
    """Readers (`audit tail`, `verify`, a test looking at a gateway's trail) take no lock: the last
    line may be half written. It is read again once the writer's lock is free; a line still torn
    then (a writer killed mid-write) is damage, not a record."""
    import threading

    from llmc_cli.config.files import file_lock

    path = tmp_path / "audit.jsonl"
    log = fill(path, count=3)
    whole = path.read_bytes()
    last = whole.splitlines(keepends=True)[-1]
    path.write_bytes(whole[: -len(last)])
    read: list[list[str]] = []
    with file_lock(str(path) + ".lock", timeout=5):
        with path.open("ab") as fh:
            fh.write(last[:20])  # what a reader may see of a write in progress
        reader = threading.Thread(target=lambda: read.append([line for _, _, line in AuditLog(path).records()]))
        reader.start()
        reader.join(0.3)
        assert reader.is_alive()  # it waits for the writer, not for a timeout of its own
        with path.open("ab") as fh:
            fh.write(last[20:])
    reader.join(10)
    assert [json.loads(line)["n"] for line in read[0]] == [0, 1, 2]
    assert log.verify()["ok"] is True

    path.write_bytes(whole[: -len(last)] + last[:20])  # the writer died mid-write
    report = AuditLog(path).verify()
    assert report["ok"] is False and report["line"] == 3 and report["reason"] == "not a valid audit record"


def test_an_allowed_calls_anchor_is_made_durable_by_its_outcome(tmp_path, monkeypatch):
    """A single call's decision and outcome cost three fsyncs, not four: the records are each
    fsynced before the call runs and before its result is shown; the anchor of an all-"allow"
    decision write waits for the outcome's append (which every allowed call gets), whose fsync
    makes the newest anchor durable. A denial, all a user hears of its call, and a write that
    is not all allow decisions keep their durable anchor at once; flush() syncs one left waiting."""
    synced = counted_fsyncs(monkeypatch)
    path = tmp_path / "audit.jsonl"
    anchor = path.with_name("audit.jsonl.anchor")
    log = AuditLog(path)
    log.append({"event": "outcome", "n": 0})  # the first anchor exists (made whole, durably, once)
    synced.clear()

    log.record_before_actions([{"event": "decision", "decision": "allow", "n": 1}])
    assert len(synced) == 1  # the record itself, before the call runs
    assert json.loads(anchor.read_text())["records"] == 2  # written all the same, for every reader
    log.record({"event": "outcome", "outcome": "ok", "n": 1}, before_action=False)
    assert len(synced) == 3  # the outcome record, then the anchor (now counting both)
    assert json.loads(anchor.read_text())["records"] == 3 and log.verify()["ok"]

    for records in (
        [{"event": "decision", "decision": "deny", "n": 2}],
        [{"event": "decision", "decision": "allow", "n": 3}, {"event": "decision", "decision": "deny", "n": 4}],
    ):
        synced.clear()
        log.record_before_actions(records)
        assert len(synced) == 2  # the record and its anchor

    log.record_before_actions([{"event": "decision", "decision": "allow", "n": 5}])
    synced.clear()
    log.flush()  # an interruption's records, or anyone ending early: the waiting anchor is synced
    assert len(synced) == 1
    log.flush()
    assert len(synced) == 1  # nothing waits any more


def test_a_deferred_flush_writes_its_outcomes_and_a_durable_anchor_in_one_lock_hold(tmp_path, monkeypatch):
    """audit.Deferred's flush (every second, or a full group): the waiting outcome records and the
    anchor made durable in one append under the lock (the records' fsync, then the anchor's), not
    an append and then a sync() taking the lock again. A flush with no outcome waiting still
    makes durable an anchor that a decision's write left for later; one with nothing left does
    nothing."""
    from llmc_cli.audit import Deferred

    synced = counted_fsyncs(monkeypatch)
    path = tmp_path / "audit.jsonl"
    anchor = path.with_name("audit.jsonl.anchor")
    log = AuditLog(path)
    holds: list[int] = []
    appended = log._append_chained
    monkeypatch.setattr(log, "_append_chained", lambda seal, later=False: (holds.append(later), appended(seal, later))[1])
    deferred = Deferred(log)  # not entered: no background thread, flushed by hand
    deferred.record_before_actions([{"event": "decision", "decision": "allow", "n": n} for n in range(3)])
    assert holds == [True]  # the decisions' write: the anchor's fsync left for the flush
    for n in range(3):
        deferred.record({"event": "outcome", "outcome": "ok", "n": n}, before_action=False)
    holds.clear()
    synced.clear()
    deferred.flush()
    assert holds == [False]  # one lock hold: the outcomes and a durable anchor
    assert len(synced) == 2  # the records', then the anchor's
    kept = log._kept
    assert [synced[0], synced[1]] == [kept[log.path][0], kept[log.anchor_path][0]]
    assert json.loads(anchor.read_text())["records"] == 6 and log.verify()["ok"]

    deferred.record_before_actions([{"event": "decision", "decision": "allow", "n": 3}])
    holds.clear()
    synced.clear()
    deferred.flush()  # nothing waits, but the decision's anchor does: synced (one lock hold)
    assert holds == [False] and len(synced) == 1 and synced[0] == kept[log.anchor_path][0]
    holds.clear()
    synced.clear()
    deferred.flush()
    assert holds == [] and synced == []  # nothing left to make durable
    assert json.loads(anchor.read_text())["records"] == 7 and log.verify()["ok"]


def test_a_deferred_trail_writes_the_same_bytes_however_its_records_are_grouped(tmp_path):
    """The chain's hashed bytes do not depend on how outcome records are grouped: the same records
    (their times given) written through Deferred, flushed in groups, and appended one at a time
    are byte-identical files, and each verifies."""
    from llmc_cli.audit import Deferred

    def records(n: int) -> list[dict[str, object]]:
        base = {"user": "u", "host": "h", "pid": 1, "profile": "p", "command": "batch", "server": "s", "tool": "t"}
        return [
            {"time": f"2026-01-01T00:00:{n % 60:02d}.000Z", **base, "arguments": {"message": str(n)}, "callHash": f"c{n}"},
            {"event": "decision", "decision": "allow", "rule": "default: allow", "reason": "by default"},
        ]

    def entries() -> list[tuple[dict[str, object], bool]]:
        out = []
        for n in range(150):
            head, decision = records(n)
            out.append(({**head, **decision}, True))
            outcome = {"event": "outcome", "outcome": "ok", "durationMs": 1.5, "resultBytes": 10, "resultSha256": "0" * 64}
            out.append(({**head, **outcome}, False))
        return out

    grouped = AuditLog(tmp_path / "grouped" / "audit.jsonl")
    deferred = Deferred(grouped)
    for n, (record, before) in enumerate(entries()):
        if before and n % 7:  # the decisions of a batch: all at once before any call
            deferred.record(record, before_action=False)  # an outcome-like wait, to mix the groups
        else:
            deferred.record(record, before_action=before)
        if n % 50 == 0:
            deferred.flush()
    deferred.flush()
    single = AuditLog(tmp_path / "single" / "audit.jsonl")
    for record, _ in entries():
        single.append(record)
    assert grouped.path.read_bytes() == single.path.read_bytes()
    assert grouped.verify()["ok"] and single.verify()["ok"] and grouped.verify()["records"] == 300


@pytest.mark.parametrize("head", ["0" * 64, 'a "quoted"\\ head\n', "é☃ \x00"])
def test_the_anchor_is_the_json_of_its_fields_padded_to_one_sector(tmp_path, head):
    """The anchor's text is made directly, not by json.dumps: byte for byte what json.dumps
    writes, whatever a (damaged or hand-written) head holds, and one sector long on disk."""
    from llmc_cli.audit.log import ANCHOR_BYTES, anchor_text

    fields = {"head": head, "records": 12, "inode": 2**40, "size": 0, "time": "2026-01-02T03:04:05.678Z"}
    assert anchor_text(head, 12, 2**40, 0, fields["time"]) == json.dumps(fields).encode()
    log = fill(tmp_path / "audit.jsonl", count=3)
    written = log.anchor_path.read_bytes()
    assert len(written) == ANCHOR_BYTES and written.endswith(b"\n")
    anchor = json.loads(written)
    assert anchor["records"] == 3 and anchor["size"] == (tmp_path / "audit.jsonl").stat().st_size

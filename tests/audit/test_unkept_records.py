"""Appends whose caller does not read the records as stored (a batch's decisions and outcomes,
through audit.Deferred) drop each record once it is sealed (issue 34, session 18: a batch's
1,000 decisions held to the end of their write were ~100 fresh pages, each a page fault). What
is written is the same either way: the same lines, byte for byte, and a chain verify accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmc_cli.audit import AuditLog, Deferred
from llmc_cli.store.chain import AuditRecord

TIME = "2026-11-29T19:00:00.000Z"


def _records(n: int) -> list[AuditRecord]:
    records: list[dict[str, Any]] = [
        {"time": TIME, "event": "decision", "decision": "allow", "arguments": {"message": str(i), "x": 0.5}, "tool": "s.echo"}
        for i in range(n)
    ]
    return records  # type: ignore[return-value]  # records of a decision's fields, on purpose


def test_unkept_append_writes_the_same_bytes_and_returns_nothing(tmp_path: Path) -> None:
    kept, dropped = AuditLog(tmp_path / "kept" / "audit.jsonl"), AuditLog(tmp_path / "dropped" / "audit.jsonl")
    stored = kept.append_many(_records(5))
    assert dropped.append_many(_records(5), kept=False) == []
    lines = (tmp_path / "dropped" / "audit.jsonl").read_bytes().splitlines()
    assert [r["hash"] for r in stored] == [json.loads(line)["hash"] for line in lines]
    assert (tmp_path / "kept" / "audit.jsonl").read_bytes() == (tmp_path / "dropped" / "audit.jsonl").read_bytes()
    assert len(stored) == 5
    kept.release()
    dropped.release()


def test_a_deferred_trail_writes_what_a_direct_one_does(tmp_path: Path) -> None:
    direct, deferred = AuditLog(tmp_path / "direct" / "audit.jsonl"), AuditLog(tmp_path / "deferred" / "audit.jsonl")
    decisions = _records(3)
    outcomes: list[AuditRecord] = [{"time": TIME, "event": "outcome", "outcome": "ok", "n": i} for i in range(3)]  # type: ignore[typeddict-item]
    direct.append_many(decisions)
    direct.append_many(outcomes)
    with Deferred(deferred) as trail:
        trail.record_before_actions(_records(3))
        for record in outcomes:
            trail.record(record, before_action=False)
    assert (tmp_path / "direct" / "audit.jsonl").read_bytes() == (tmp_path / "deferred" / "audit.jsonl").read_bytes()
    direct.release()
    deferred.release()

"""The outcome record of a call that returned a result (services/calls.py close_outcome, a
batch's every call): the very record close_call writes with those four fields (the same fields
in the same order), once per call, and none once the call was closed (an interruption's)."""

from __future__ import annotations

from typing import Any

from llmc_cli.config.secrets import Masker
from llmc_cli.model import ToolCall
from llmc_cli.policy import Decision
from llmc_cli.services import calls


class Sink:
    """An AuditSink that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(self, record: Any, *, before_action: bool) -> None:
        assert not before_action
        self.records.append(record)


def opened(sink: Sink) -> calls.Authorization:
    call = ToolCall("srv", "echo", {"message": "hi"})
    base: Any = {"user": "u", "host": "h", "pid": 1, "profile": "p", "command": "batch", "server": "srv", "tool": "echo"}
    base |= {"arguments": {"message": "hi"}, "callHash": "hmac-sha256:00"}
    masker = Masker(["a-secret-value"])
    authorized = calls.Authorization(
        call, Decision("allow", "default: allow", "allowed", "hmac-sha256:00"), base, masker, None, None, None, True
    )
    authorized.opened = calls.OPEN_CALLS.open(sink, authorized.base, masker)  # type: ignore[arg-type]
    return authorized


def test_the_outcome_record_is_close_calls() -> None:
    fields: Any = {"outcome": "ok", "durationMs": 1.5, "resultBytes": 42, "resultSha256": "ab" * 32}
    old, new = Sink(), Sink()
    calls.close_call(old, opened(old), dict(fields), own=True)  # type: ignore[arg-type]
    calls.close_outcome(new, opened(new), "ok", 1.5, 42, "ab" * 32)  # type: ignore[arg-type]
    assert new.records == old.records and len(new.records) == 1
    assert list(new.records[0]) == list(old.records[0])  # the fields' order too (telemetry's log records)


def test_a_closed_call_gets_no_second_outcome() -> None:
    sink = Sink()
    authorized = opened(sink)
    calls.close_outcome(sink, authorized, "ok", 1.0, 2, "cd" * 32)  # type: ignore[arg-type]
    calls.close_outcome(sink, authorized, "tool_error", 1.0, 2, "cd" * 32)  # type: ignore[arg-type]
    assert [r["outcome"] for r in sink.records] == ["ok"]
    assert authorized.base.get("event") is None  # the base is copied, never written into

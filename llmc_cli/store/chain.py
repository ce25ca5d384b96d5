"""What every keeper of the audit chain shares: the JSON Lines file (audit/log.py) and the
database (audit/postgres.py over store/postgres.py)."""

from __future__ import annotations

from typing import Any, Protocol

GENESIS = "0" * 64  # the `prev` of a chain's first record, and the head of an empty chain


class AuditSink(Protocol):
    """Where call_tool writes its audit records: the JSON Lines file (audit.AuditLog), the chain
    in PostgreSQL (audit.PostgresAuditLog), or a batch's audit.Deferred in front of either.
    Decisions are stored before this returns, and an AuditError (exit 3) says when they cannot
    be: a decision that is not stored stops its call. Outcomes may wait in a Deferred."""

    def record(self, record: dict[str, Any], *, before_action: bool) -> None: ...

    def record_before_actions(self, records: list[dict[str, Any]]) -> None:
        """Decision records of calls about to run, stored together (one write where the sink can)."""
        ...

    def flush(self) -> None:
        """Store what waits in memory (a Deferred's outcome records); a log stores at once."""
        ...

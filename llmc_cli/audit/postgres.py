"""The audit chain kept in PostgreSQL (store/postgres/chain.py) instead of the JSON Lines file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from llmc_cli import interrupts, telemetry
from llmc_cli.audit.records import AuditError
from llmc_cli.audit.trail import ChainedLog, Seal, sealer
from llmc_cli.store.chain import CALL_FIELDS, GENESIS, AuditRecord
from llmc_cli.store.postgres import Database, StateError
from llmc_cli.store.postgres.chain import PostgresChain


class PostgresAuditLog(ChainedLog):
    """The same hash chain, records and anchor in PostgreSQL (store/postgres/chain.py): the anchor is the
    head row, moved in the transaction that appends, under an advisory lock every writer on every
    machine takes, so there is one linear chain. `verify`, `tail` and `head` read it as they read
    the file; a record is one row (`file` in reports is the database, `line` the row's seq)."""

    def __init__(self, url: str) -> None:

        self.chain = PostgresChain(Database.for_url(url))
        self.path = Path(self.chain.db.name)  # only ever shown, never opened

    def _append_chained(self, seal: Seal, anchor_later: bool = False) -> None:
        # A transaction's commit makes the rows and the head durable at once: nothing to leave for later.

        try:
            with interrupts.deferred():
                self.chain.append_chained(seal)
        except StateError as exc:
            raise AuditError(exc.message) from None

    def close_lost_calls(self, closer: str) -> int:
        """A `lost` outcome for every call that a gateway replica whose lease ran out decided and
        never recorded the end of (killed, or cut off from the database for longer than its
        lease); `closer` is the replica writing them. How many were closed."""

        written: list[dict[str, Any]] = []

        def seal_lost(orphans: list[tuple[str, dict[str, Any]]]) -> Seal:
            records = [
                cast(
                    "AuditRecord",
                    {
                        **{k: decision[k] for k in CALL_FIELDS if k in decision},
                        "event": "outcome",
                        "outcome": "lost",
                        "replica": replica,
                        "closedBy": closer,
                        "reason": f"gateway replica {replica} stopped renewing its lease before it recorded this call's "
                        "outcome (killed, or cut off from the database); the call may have run",
                    },
                )
                for replica, decision in orphans
            ]
            return sealer(records, written)

        try:
            closed = self.chain.close_lost_calls(seal_lost)
        except StateError as exc:
            raise AuditError(exc.message) from None
        for full in written:
            telemetry.audit_record(full)
        return closed

    @property
    def anchor_path(self) -> Path:
        return self.path

    def anchor(self) -> dict[str, Any] | None:
        head = self._db_head()
        return None if head is None else {"head": head[0], "records": head[1]}

    def head(self) -> dict[str, Any]:
        head = self._db_head()
        if head is None:
            return {"head": GENESIS, "records": 0, "anchor": None}
        return {"head": head[0], "records": head[1], "anchor": self.chain.db.name}

    def _db_head(self) -> tuple[str, int] | None:

        try:
            return self.chain.head()
        except StateError as exc:
            raise AuditError(exc.message) from None

    def files(self) -> list[Path]:
        return [self.path]

    def records(self) -> Iterator[tuple[Path, int, str]]:

        try:
            for seq, line in self.chain.records():
                yield self.path, seq, line
        except StateError as exc:
            raise AuditError(exc.message) from None

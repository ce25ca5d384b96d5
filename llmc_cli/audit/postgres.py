"""The audit chain kept in PostgreSQL (store/postgres.py) instead of the JSON Lines file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from llmc_cli.audit.records import AuditError
from llmc_cli.audit.trail import ChainedLog, Seal
from llmc_cli.store.chain import GENESIS


class PostgresAuditLog(ChainedLog):
    """The same hash chain, records and anchor in PostgreSQL (store/postgres.py): the anchor is the
    head row, moved in the transaction that appends, under an advisory lock every writer on every
    machine takes, so there is one linear chain. `verify`, `tail` and `head` read it as they read
    the file; a record is one row (`file` in reports is the database, `line` the row's seq)."""

    def __init__(self, url: str) -> None:
        from llmc_cli.store.postgres import Database

        self.db = Database.for_url(url)
        self.path = Path(self.db.name)  # only ever shown, never opened

    def _append_chained(self, seal: Seal) -> None:
        from llmc_cli import interrupts
        from llmc_cli.store.postgres import StateError

        try:
            with interrupts.deferred():
                self.db.append_chained(seal)
        except StateError as exc:
            raise AuditError(exc.message) from None

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
        return {"head": head[0], "records": head[1], "anchor": self.db.name}

    def _db_head(self) -> tuple[str, int] | None:
        from llmc_cli.store.postgres import StateError

        try:
            return self.db.audit_head()
        except StateError as exc:
            raise AuditError(exc.message) from None

    def files(self) -> list[Path]:
        return [self.path]

    def records(self) -> Iterator[tuple[Path, int, str]]:
        from llmc_cli.store.postgres import StateError

        try:
            for seq, line in self.db.audit_records():
                yield self.path, seq, line
        except StateError as exc:
            raise AuditError(exc.message) from None

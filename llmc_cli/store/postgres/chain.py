"""The audit chain in the state database (the PostgreSQL store of audit/postgres.py): records as
the exact JSON text that was hashed, the head row moved in the transaction that appends, under an
advisory lock every writer on every machine takes; and a gateway replica's open calls (an allowed
decision whose outcome is not in the chain yet), so that a survivor closes them as `lost`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from llmc_cli.store.chain import GENESIS, call_key
from llmc_cli.store.postgres import AUDIT_LOCK, Database

if TYPE_CHECKING:
    import psycopg


class PostgresChain:
    """The chain's tables, through the connection of `database` (shared with the rest of the state)."""

    def __init__(self, database: Database) -> None:
        self.db = database

    def append_chained(self, seal: Callable[[str, int], list[bytes]]) -> None:
        """Under the transaction-scoped advisory lock (every writer on every machine waits here, so
        the chain stays linear): read the head, seal(head, count) -> the new records as JSON text
        (each chained to the one before), insert them, move the head; one commit."""

        def work(cur: psycopg.Cursor[Any]) -> None:
            self.db.check_schema(cur)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
            self._append(cur, seal)

        self.db.run("cannot write the audit log", work)

    def _append(self, cur: psycopg.Cursor[Any], seal: Callable[[str, int], list[bytes]]) -> None:
        """Under the audit lock: seal after the head, insert, move the head, and keep this
        replica's open calls (opened by an allowed decision, closed by an outcome)."""

        cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
        row = cur.fetchone()
        head, count = (str(row[0]), int(row[1])) if row else (GENESIS, 0)
        lines = [line.decode("utf-8") for line in seal(head, count)]  # the records as JSON text
        cur.executemany(
            "INSERT INTO llmc_audit (seq, record) VALUES (%s, %s)", [(count + i + 1, line) for i, line in enumerate(lines)]
        )
        new_head = json.loads(lines[-1])["hash"] if lines else head
        cur.execute(
            "INSERT INTO llmc_audit_head (id, head, records) VALUES (1, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET head = excluded.head, records = excluded.records",
            (new_head, count + len(lines)),
        )
        if self.db.replica is None:
            return

        records = [json.loads(line) for line in lines]

        opened = [
            (self.db.replica, call_key(r), count + i + 1, lines[i])
            for i, r in enumerate(records)
            if r.get("event") == "decision" and r.get("decision") == "allow"
        ]
        closed = [(self.db.replica, call_key(r)) for r in records if r.get("event") == "outcome"]
        if opened:
            # The lease is renewed with the decisions it covers: a replica never has open calls
            # without a live lease, even before its first heartbeat.
            cur.execute(
                "INSERT INTO llmc_replica (id, lease_until) VALUES (%s, now() + make_interval(secs => %s)) "
                "ON CONFLICT (id) DO UPDATE SET lease_until = "
                "greatest(llmc_replica.lease_until, excluded.lease_until)",
                (self.db.replica, self.db.lease_seconds),
            )
            cur.executemany("INSERT INTO llmc_open_call (replica, call_key, seq, record) VALUES (%s, %s, %s, %s)", opened)
        if closed:
            cur.executemany(
                "DELETE FROM llmc_open_call WHERE ctid = (SELECT ctid FROM llmc_open_call "
                "WHERE replica = %s AND call_key = %s ORDER BY seq LIMIT 1)",
                closed,
            )

    def close_lost_calls(self, seal_lost: Callable[[list[tuple[str, dict[str, Any]]]], Callable[[str, int], list[bytes]]]) -> int:
        """Close the open calls of every replica whose lease ran out: seal_lost([(replica, decision
        record)]) seals their outcome records, appended in the transaction that deletes the open
        calls, under the audit lock: several survivors close each call exactly once."""

        def work(cur: psycopg.Cursor[Any]) -> int:
            self.db.check_schema(cur)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
            cur.execute("DELETE FROM llmc_replica WHERE lease_until < now()")
            cur.execute(
                "DELETE FROM llmc_open_call o WHERE NOT EXISTS "
                "(SELECT 1 FROM llmc_replica r WHERE r.id = o.replica) RETURNING replica, seq, record"
            )
            rows = sorted(cur.fetchall(), key=lambda row: int(row[1]))
            if rows:
                self._append(cur, seal_lost([(str(replica), json.loads(record)) for replica, _, record in rows]))
            return len(rows)

        return self.db.run("cannot close the calls of replicas that are gone", work)

    def head(self) -> tuple[str, int] | None:
        def work(cur: psycopg.Cursor[Any]) -> tuple[str, int] | None:
            self.db.check_schema(cur)
            cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
            row = cur.fetchone()
            return (str(row[0]), int(row[1])) if row else None

        return self.db.run("cannot read the audit head", work)

    def records(self, after: int = 0, batch: int = 5000) -> Iterator[tuple[int, str]]:
        """(seq, JSON text) in chain order, read in pages (a long trail is not held in memory)."""
        while True:

            def page(cur: psycopg.Cursor[Any], start: int = after) -> list[tuple[int, str]]:
                self.db.check_schema(cur)
                cur.execute("SELECT seq, record FROM llmc_audit WHERE seq > %s ORDER BY seq LIMIT %s", (start, batch))
                return [(int(seq), str(record)) for seq, record in cur.fetchall()]

            rows = self.db.run("cannot read the audit log", page)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1][0]

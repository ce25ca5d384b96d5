"""The rate limits' windows in the state database (RateWindows): one window per key for every
replica and machine using it."""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from llmc_cli.store.postgres import Database

if TYPE_CHECKING:
    import psycopg

    from llmc_cli.store.postgres import Database


class PostgresRateWindows:
    def __init__(self, url: str) -> None:
        self.url = url

    @cached_property
    def database(self) -> Database:

        return Database.for_url(self.url)

    def acquire(self, limits: list[tuple[str, int]], window: float) -> tuple[str, int, float] | None:
        """Rows of each key are locked by an advisory lock on the key, so replicas on many machines
        count one window; the keys are locked in one order, so two calls never deadlock."""
        database = self.database
        now = time.time()

        def work(cur: psycopg.Cursor[Any]) -> tuple[str, int, float] | None:
            database.check_schema(cur)
            for key, _ in sorted(limits):
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            for key, limit in limits:
                cur.execute("DELETE FROM llmc_rate WHERE key = %s AND at <= %s", (key, now - window))
                cur.execute("SELECT count(*), min(at) FROM llmc_rate WHERE key = %s", (key,))
                row = cur.fetchone()
                if row and int(row[0]) >= limit:
                    return key, limit, now - float(row[1])
            cur.executemany("INSERT INTO llmc_rate (key, at) VALUES (%s, %s)", [(key, now) for key, _ in limits])
            return None

        return database.run("cannot count the rate limit", work)

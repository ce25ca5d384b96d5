"""Cached tool results in the state database's llmc_result_cache (ResultCache), shared by the
gateway's replicas. The database's clock decides expiry; expired entries are swept out when one
is stored."""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING, Any

from llmc_cli.model import JSONObject
from llmc_cli.store.postgres import Database

if TYPE_CHECKING:
    import psycopg

    from llmc_cli.store.postgres import Database


class PostgresResultCache:
    def __init__(self, url: str) -> None:
        self.url = url
        self.dropped: str | None = None

    @cached_property
    def database(self) -> Database:

        return Database.for_url(self.url)

    def get(self, key: str, server: str, ttl: float | None = None) -> JSONObject | None:
        """With `ttl` (the TTL configured now), an entry with more of its life left than that was
        stored under a longer TTL: not answered (the table keeps no store time; a miss costs a call)."""
        database = self.database
        self.dropped = None

        def work(cur: psycopg.Cursor[Any]) -> str | None:
            database.check_schema(cur)
            cur.execute(
                "SELECT result, expires_at > now() + make_interval(secs => %s) FROM llmc_result_cache "
                "WHERE key = %s AND expires_at > now()",
                (ttl if ttl is not None else 1e12, key),
            )
            row = cur.fetchone()
            if row and row[1]:
                self.dropped = f"older than ttl_seconds = {ttl:g} (stored under a longer one)"
                return None
            return str(row[0]) if row else None

        text = database.run("cannot read the result cache", work)
        try:
            result = json.loads(text) if text is not None else None
        except ValueError:
            return None
        return result if isinstance(result, dict) else None

    def put(self, key: str, server: str, result: JSONObject, ttl: float) -> None:
        database = self.database
        text = json.dumps(result, ensure_ascii=False)

        def work(cur: psycopg.Cursor[Any]) -> None:
            database.check_schema(cur)
            cur.execute("DELETE FROM llmc_result_cache WHERE expires_at <= now()")
            cur.execute(
                "INSERT INTO llmc_result_cache (key, server, result, expires_at) VALUES "
                "(%s, %s, %s, now() + make_interval(secs => %s)) ON CONFLICT (key) DO UPDATE SET "
                "result = excluded.result, expires_at = excluded.expires_at",
                (key, server, text, ttl),
            )

        database.run("cannot store the result", work)

    def clear(self, server: str | None = None) -> int:
        database = self.database

        def work(cur: psycopg.Cursor[Any]) -> int:
            database.check_schema(cur)
            if server is None:
                cur.execute("DELETE FROM llmc_result_cache")
            else:
                cur.execute("DELETE FROM llmc_result_cache WHERE server = %s", (server,))
            return int(cur.rowcount)

        return database.run("cannot clear the result cache", work)

"""Pre-approved exact calls in the state database (Approvals), per profile name as the profile's
own `approved` list is: every machine using the database reads them."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from llmc_cli.store.postgres import Database

if TYPE_CHECKING:
    import psycopg

    from llmc_cli.store.postgres import Database


class PostgresApprovals:
    def __init__(self, url: str, profile: str) -> None:
        self.url = url
        self.profile = profile

    @cached_property
    def database(self) -> Database:

        return Database.for_url(self.url)

    def is_approved(self, digest: str) -> bool:
        database = self.database

        def work(cur: psycopg.Cursor[Any]) -> bool:
            database.check_schema(cur)
            cur.execute("SELECT 1 FROM llmc_approved WHERE profile = %s AND hash = %s", (self.profile, digest))
            return cur.fetchone() is not None

        return database.run("cannot read the approved calls", work)

    def approve(self, digest: str, tool: str) -> str:
        database = self.database

        def work(cur: psycopg.Cursor[Any]) -> None:
            database.check_schema(cur)
            cur.execute(
                "INSERT INTO llmc_approved (profile, hash, tool) VALUES (%s, %s, %s) ON CONFLICT (profile, hash) DO NOTHING",
                (self.profile, digest, tool),
            )

        database.run("cannot record the approval", work)
        return f"for profile {self.profile} in the {database.name}"

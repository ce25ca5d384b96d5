"""What a PostgresState (store/state.py) is made of: the one place that loads the PostgreSQL side
of the state, when a url is set. psycopg itself loads later still, when a part first reaches the
database (Database)."""

from __future__ import annotations

from llmc_cli.store.postgres import Database
from llmc_cli.store.postgres.approvals import PostgresApprovals
from llmc_cli.store.postgres.rate import PostgresRateWindows
from llmc_cli.store.postgres.results import PostgresResultCache
from llmc_cli.store.postgres.sessions import PostgresHostSessions

__all__ = ["Database", "PostgresApprovals", "PostgresHostSessions", "PostgresRateWindows", "PostgresResultCache"]

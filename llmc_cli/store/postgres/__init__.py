"""Shared state in PostgreSQL (`[state] url` in the profile, or LLMC_STATE_URL): the connection and
the schema's migrations here; one module per concern beside it, each the PostgreSQL side of a
protocol of store/state.py: chain.py (the audit chain and the replicas' open calls), rate.py
(RateWindows), approvals.py (Approvals), results.py (ResultCache), sessions.py (HostSessions and
the gateway replicas' leases). Every llmc that uses the same database, on any machine, shares them.

psycopg is imported only under this package, and only when a url is set (`pip install
'llmc-cli[postgres]'`). One connection per url per process, reused by every call of a batch and
every host of the gateway (a lock serialises its use); a connection that broke is dropped and
opened again on the next use, so a database that comes back is used again without a restart.
Any failure is a StateError (exit 3) naming the database as host:port/dbname, never its password.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from llmc_cli.errors import ConfigError, optional_module
from llmc_cli.store.state import URL_VAR

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 6
AUDIT_LOCK = 0x6C6C6D63  # "llmc": the advisory lock that keeps the audit chain linear
LEASE_SECONDS = 30.0  # a gateway replica that has not renewed its lease for this long is gone
T = TypeVar("T")

# Versioned, each step applied once in its own transaction; `llmc state migrate` runs what is missing.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        # The record is kept as the exact JSON text that was hashed: jsonb would reorder keys and
        # reformat numbers, and the chain must verify byte for byte.
        "CREATE TABLE IF NOT EXISTS llmc_audit (seq bigint PRIMARY KEY, record text NOT NULL)",
        # The anchor: the chain head and record count, replaced in the same transaction as the append.
        "CREATE TABLE IF NOT EXISTS llmc_audit_head (id int PRIMARY KEY CHECK (id = 1), head text NOT NULL, "
        "records bigint NOT NULL)",
    ],
    2: [
        "CREATE TABLE IF NOT EXISTS llmc_rate (key text NOT NULL, at double precision NOT NULL)",
        "CREATE INDEX IF NOT EXISTS llmc_rate_key_at ON llmc_rate (key, at)",
    ],
    3: [
        # Pre-approved exact calls, per profile name as the profile's own `approved` list is.
        "CREATE TABLE IF NOT EXISTS llmc_approved (profile text NOT NULL, hash text NOT NULL, tool text NOT NULL, "
        "approved_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (profile, hash))",
    ],
    4: [
        # The gateway's initialize-era sessions, keyed by the SHA-256 of the session id (the id is
        # a bearer secret: whoever reads this table must not be able to ride on a session). The
        # database's clock decides idleness, so replicas with skewed clocks agree.
        "CREATE TABLE IF NOT EXISTS llmc_host_session (id_sha256 text PRIMARY KEY, record jsonb NOT NULL, "
        "touched timestamptz NOT NULL DEFAULT now())",
        "CREATE INDEX IF NOT EXISTS llmc_host_session_touched ON llmc_host_session (touched)",
    ],
    5: [
        # Gateway replicas: each renews its lease while it runs (the database's clock decides).
        "CREATE TABLE IF NOT EXISTS llmc_replica (id text PRIMARY KEY, lease_until timestamptz NOT NULL, "
        "started timestamptz NOT NULL DEFAULT now())",
        # A replica's allowed calls whose outcome is not in the chain yet: the decision record as
        # chained (seq, text), inserted and deleted in the transactions that append the decision
        # and the outcome, so a row exists exactly while the chain shows a decision without end.
        "CREATE TABLE IF NOT EXISTS llmc_open_call (replica text NOT NULL, call_key text NOT NULL, "
        "seq bigint NOT NULL, record text NOT NULL)",
        "CREATE INDEX IF NOT EXISTS llmc_open_call_key ON llmc_open_call (replica, call_key)",
    ],
    6: [
        # Cached tool results ([cache]), shared by replicas: the key is a digest (store/results.py),
        # the row holds the result alone, never the arguments. The database's clock decides expiry.
        "CREATE TABLE IF NOT EXISTS llmc_result_cache (key text PRIMARY KEY, server text NOT NULL, "
        "result text NOT NULL, expires_at timestamptz NOT NULL)",
        "CREATE INDEX IF NOT EXISTS llmc_result_cache_server ON llmc_result_cache (server)",
        "CREATE INDEX IF NOT EXISTS llmc_result_cache_expires ON llmc_result_cache (expires_at)",
    ],
}


class StateError(ConfigError):
    """The state database cannot be used: nothing that needs it happens (exit 3)."""


def describe(url: str) -> str:
    """host:port/dbname for messages: never the user's password."""
    try:
        parts = _conninfo(url)
    except Exception:  # noqa: BLE001 - a url libpq cannot parse: still say which kind, not its text
        return "PostgreSQL database (unparsable url)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"PostgreSQL database {host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _conninfo(url: str) -> dict[str, Any]:
    """libpq's reading of a url (ImportError without psycopg, ProgrammingError for a bad url)."""
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(url)


def _clean(url: str, exc: BaseException) -> str:
    """psycopg's message, one line, with any password in the url taken out."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        password = _conninfo(url).get("password")
    except Exception:  # noqa: BLE001
        password = None
    for secret in filter(None, [password, os.environ.get("PGPASSWORD")]):
        text = text.replace(str(secret), "***")
    return text


class Database:
    """One reused connection to the state database, safe to share between threads."""

    _open: ClassVar[dict[str, Database]] = {}
    _open_lock = threading.Lock()
    # Where a long-running process (the gateway) says that a database became unreachable and that
    # it is back: once each way, however many requests fail meanwhile; None: nobody is told.
    outages: Callable[[str], None] | None = None
    _down: ClassVar[set[str]] = set()  # urls unreachable now, for every connection of this process

    def __init__(self, url: str) -> None:
        # Every use of the database starts here: psycopg, or the extra to install, is known now.
        self._psycopg: Any = optional_module("psycopg", "postgres", f"[state] url ({URL_VAR})")
        self.url = url
        self.name = describe(url)
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        # A gateway replica's id: its allowed decisions are kept open (llmc_open_call) until their
        # outcome is appended, so that a survivor can close them if this process dies.
        self.replica: str | None = None
        self.lease_seconds = LEASE_SECONDS

    def connection_failed(self, exc: BaseException) -> None:
        """An unreachable database: said once (Database.outages) until it is reachable again."""
        with Database._open_lock:
            first = self.url not in Database._down
            Database._down.add(self.url)
        if first and Database.outages is not None:
            Database.outages(
                f"the {self.name} is unreachable ({_clean(self.url, exc)}); what needs it is refused until it is back"
            )

    def connection_works(self) -> None:
        if self.url in Database._down:
            with Database._open_lock:
                back = self.url in Database._down
                Database._down.discard(self.url)
            if back and Database.outages is not None:
                Database.outages(f"the {self.name} is reachable again")

    @classmethod
    def for_url(cls, url: str) -> Database:
        with cls._open_lock:
            if url not in cls._open:
                cls._open[url] = cls(url)
            return cls._open[url]

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._psycopg.connect(self.url, connect_timeout=5, application_name="llmc")
        return self._conn

    def run(self, what: str, work: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """work(cursor) in one transaction, committed; StateError saying `what` failed otherwise.
        A connection that broke is closed, so the next run opens a new one."""
        pg = self._psycopg
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    done = work(cur)
            except pg.Error as exc:
                if self._conn is not None and (self._conn.broken or isinstance(exc, pg.OperationalError)):
                    self._conn.close()
                    self._conn = None
                if isinstance(exc, pg.OperationalError):
                    self.connection_failed(exc)
                raise StateError(f"{what} in the {self.name}: {_clean(self.url, exc)}") from None
        self.connection_works()
        return done

    def migrate(self) -> dict[str, Any]:
        """Apply the missing schema versions (idempotent): {"version", "applied"}."""

        def step(cur: psycopg.Cursor[Any]) -> list[int]:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK + 1,))  # two migrations at once wait
            cur.execute("CREATE TABLE IF NOT EXISTS llmc_schema (version int PRIMARY KEY)")
            cur.execute("SELECT coalesce(max(version), 0) FROM llmc_schema")
            row = cur.fetchone()
            current = int(row[0]) if row else 0
            applied = []
            for version in sorted(v for v in MIGRATIONS if v > current):
                for statement in MIGRATIONS[version]:
                    cur.execute(statement)  # fixed text, no parameters
                cur.execute("INSERT INTO llmc_schema (version) VALUES (%s)", (version,))
                applied.append(version)
            return applied

        applied = self.run("cannot migrate the schema", step)
        return {"database": self.name, "version": SCHEMA_VERSION, "applied": applied}

    def check_schema(self, cur: psycopg.Cursor[Any]) -> None:
        cur.execute("SELECT to_regclass('llmc_schema') IS NOT NULL")
        row = cur.fetchone()
        version = 0
        if row and row[0]:
            cur.execute("SELECT coalesce(max(version), 0) FROM llmc_schema")
            got = cur.fetchone()
            version = int(got[0]) if got else 0
        if version < SCHEMA_VERSION:
            raise StateError(
                f"the {self.name} has schema version {version}, llmc needs {SCHEMA_VERSION}: run `llmc state migrate`"
            )

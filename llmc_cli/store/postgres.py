"""Shared state in PostgreSQL (`[state] url` in the profile, or LLMC_STATE_URL): the audit chain,
the rate-limit windows and the pre-approved call hashes of every llmc that uses the same
database, on any machine, and the gateway's initialize-era host sessions (so that another replica
can resume one).

psycopg is imported only here, and only when a url is set (`pip install 'llmc-cli[postgres]'`).
One connection per url per process, reused by every call of a batch and every host of the
gateway (a lock serialises its use); a connection that broke is dropped and opened again on the
next use, so a database that comes back is used again without a restart. Any failure is a
StateError (exit 3) naming the database as host:port/dbname, never its password.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from llmc_cli.errors import ConfigError, optional_module
from llmc_cli.store.chain import GENESIS

if TYPE_CHECKING:
    import psycopg

URL_VAR = "LLMC_STATE_URL"
SCHEMA_VERSION = 4
AUDIT_LOCK = 0x6C6C6D63  # "llmc": the advisory lock that keeps the audit chain linear
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
}


class StateError(ConfigError):
    """The state database cannot be used: nothing that needs it happens (exit 3)."""


def state_url(configured: str | None) -> str | None:
    """LLMC_STATE_URL wins over the profile's `[state] url`; None means files."""
    return os.environ.get(URL_VAR) or configured or None


def describe(url: str) -> str:
    """host:port/dbname for messages: never the user's password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a url libpq cannot parse: still say which kind, not its text
        return "PostgreSQL database (unparsable url)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"PostgreSQL database {host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _clean(url: str, exc: BaseException) -> str:
    """psycopg's message, one line, with any password in the url taken out."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(url).get("password")
    except Exception:  # noqa: BLE001
        password = None
    for secret in filter(None, [password, os.environ.get("PGPASSWORD")]):
        text = text.replace(str(secret), "***")
    return text


class Database:
    """One reused connection to the state database, safe to share between threads."""

    _open: dict[str, "Database"] = {}
    _open_lock = threading.Lock()

    def __init__(self, url: str) -> None:
        optional_module("psycopg", "postgres", f"[state] url ({URL_VAR})")  # every use of the database starts here
        self.url = url
        self.name = describe(url)
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()

    @classmethod
    def for_url(cls, url: str) -> "Database":
        with cls._open_lock:
            if url not in cls._open:
                cls._open[url] = cls(url)
            return cls._open[url]

    def _connection(self) -> "psycopg.Connection[Any]":
        import psycopg  # present: checked when this Database was made

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.url, connect_timeout=5, application_name="llmc")
        return self._conn

    def run(self, what: str, work: Callable[["psycopg.Cursor[Any]"], T]) -> T:
        """work(cursor) in one transaction, committed; StateError saying `what` failed otherwise.
        A connection that broke is closed, so the next run opens a new one."""
        import psycopg

        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    return work(cur)
            except psycopg.Error as exc:
                if self._conn is not None and (self._conn.broken or isinstance(exc, psycopg.OperationalError)):
                    self._conn.close()
                    self._conn = None
                raise StateError(f"{what} in the {self.name}: {_clean(self.url, exc)}") from None

    def migrate(self) -> dict[str, Any]:
        """Apply the missing schema versions (idempotent): {"version", "applied"}."""

        def step(cur: "psycopg.Cursor[Any]") -> list[int]:
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

    def check_schema(self, cur: "psycopg.Cursor[Any]") -> None:
        cur.execute("SELECT to_regclass('llmc_schema') IS NOT NULL")
        row = cur.fetchone()
        version = 0
        if row and row[0]:
            cur.execute("SELECT coalesce(max(version), 0) FROM llmc_schema")
            got = cur.fetchone()
            version = int(got[0]) if got else 0
        if version < SCHEMA_VERSION:
            raise StateError(f"the {self.name} has schema version {version}, llmc needs {SCHEMA_VERSION}: "
                             "run `llmc state migrate`")

    # -- the audit chain ---------------------------------------------------------------------------

    def append_chained(self, seal: Callable[[str, int], list[str]]) -> None:
        """Under the transaction-scoped advisory lock (every writer on every machine waits here, so
        the chain stays linear): read the head, seal(head, count) -> the new records as JSON text
        (each chained to the one before), insert them, move the head; one commit."""

        def work(cur: "psycopg.Cursor[Any]") -> None:
            self.check_schema(cur)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
            cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
            row = cur.fetchone()
            head, count = (str(row[0]), int(row[1])) if row else (GENESIS, 0)
            lines = seal(head, count)
            cur.executemany("INSERT INTO llmc_audit (seq, record) VALUES (%s, %s)",
                            [(count + i + 1, line) for i, line in enumerate(lines)])
            import json

            new_head = json.loads(lines[-1])["hash"] if lines else head
            cur.execute("INSERT INTO llmc_audit_head (id, head, records) VALUES (1, %s, %s) "
                        "ON CONFLICT (id) DO UPDATE SET head = excluded.head, records = excluded.records",
                        (new_head, count + len(lines)))

        self.run("cannot write the audit log", work)

    def audit_head(self) -> tuple[str, int] | None:
        def work(cur: "psycopg.Cursor[Any]") -> tuple[str, int] | None:
            self.check_schema(cur)
            cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
            row = cur.fetchone()
            return (str(row[0]), int(row[1])) if row else None

        return self.run("cannot read the audit head", work)

    def audit_records(self, after: int = 0, batch: int = 5000) -> Iterator[tuple[int, str]]:
        """(seq, JSON text) in chain order, read in pages (a long trail is not held in memory)."""
        while True:
            def page(cur: "psycopg.Cursor[Any]", start: int = after) -> list[tuple[int, str]]:
                self.check_schema(cur)
                cur.execute("SELECT seq, record FROM llmc_audit WHERE seq > %s ORDER BY seq LIMIT %s", (start, batch))
                return [(int(seq), str(record)) for seq, record in cur.fetchall()]

            rows = self.run("cannot read the audit log", page)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1][0]

    # -- rate windows ------------------------------------------------------------------------------

    def acquire_rate(self, limits: list[tuple[str, int]], now: float, window: float) -> tuple[str, int, float] | None:
        """Count one call against each (key, limit) unless one is full: then (key, limit, oldest
        time in its window) and nothing is counted. Rows of each key are locked by an advisory
        lock on the key, so replicas on many machines count one window."""

        def work(cur: "psycopg.Cursor[Any]") -> tuple[str, int, float] | None:
            self.check_schema(cur)
            for key, _ in sorted(limits):  # one lock order: no deadlock between two keys
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            for key, limit in limits:
                cur.execute("DELETE FROM llmc_rate WHERE key = %s AND at <= %s", (key, now - window))
                cur.execute("SELECT count(*), min(at) FROM llmc_rate WHERE key = %s", (key,))
                row = cur.fetchone()
                if row and int(row[0]) >= limit:
                    return key, limit, float(row[1])
            cur.executemany("INSERT INTO llmc_rate (key, at) VALUES (%s, %s)", [(key, now) for key, _ in limits])
            return None

        return self.run("cannot count the rate limit", work)

    # -- pre-approved calls ------------------------------------------------------------------------

    def approve(self, profile: str, digest: str, tool: str) -> None:
        """Pre-approve one exact call (its hash) for a profile; approving twice is one approval."""

        def work(cur: "psycopg.Cursor[Any]") -> None:
            self.check_schema(cur)
            cur.execute("INSERT INTO llmc_approved (profile, hash, tool) VALUES (%s, %s, %s) "
                        "ON CONFLICT (profile, hash) DO NOTHING", (profile, digest, tool))

        self.run("cannot record the approval", work)

    def is_approved(self, profile: str, digest: str) -> bool:
        def work(cur: "psycopg.Cursor[Any]") -> bool:
            self.check_schema(cur)
            cur.execute("SELECT 1 FROM llmc_approved WHERE profile = %s AND hash = %s", (profile, digest))
            return cur.fetchone() is not None

        return self.run("cannot read the approved calls", work)

    # -- the gateway's host sessions ---------------------------------------------------------------

    def save_host_session(self, key: str, record: dict[str, Any], idle_seconds: float) -> None:
        """Keep a session's record; sessions idle longer than idle_seconds are swept out on the way."""
        from psycopg.types.json import Jsonb

        def work(cur: "psycopg.Cursor[Any]") -> None:
            self.check_schema(cur)
            cur.execute("DELETE FROM llmc_host_session WHERE touched < now() - make_interval(secs => %s)",
                        (idle_seconds,))
            cur.execute("INSERT INTO llmc_host_session (id_sha256, record) VALUES (%s, %s) ON CONFLICT (id_sha256) "
                        "DO UPDATE SET record = excluded.record, touched = now()", (key, Jsonb(record)))

        self.run("cannot keep the session", work)

    def resume_host_session(self, key: str, idle_seconds: float) -> dict[str, Any] | None:
        """A session's record, marked as used now, unless it is unknown or idle too long."""

        def work(cur: "psycopg.Cursor[Any]") -> dict[str, Any] | None:
            self.check_schema(cur)
            cur.execute("UPDATE llmc_host_session SET touched = now() WHERE id_sha256 = %s "
                        "AND touched >= now() - make_interval(secs => %s) RETURNING record", (key, idle_seconds))
            row = cur.fetchone()
            return dict(row[0]) if row else None

        return self.run("cannot read the session", work)

    def forget_host_session(self, key: str) -> None:
        def work(cur: "psycopg.Cursor[Any]") -> None:
            cur.execute("DELETE FROM llmc_host_session WHERE id_sha256 = %s", (key,))

        self.run("cannot end the session", work)


class PostgresHostSessions:
    """The gateway's shared sessions (gateway/http.py SharedSessions) in the state database: any
    replica resumes a session another one opened. Only the SHA-256 of a session id is stored."""

    def __init__(self, url: str, idle_seconds: float) -> None:
        self.database = Database.for_url(url)
        self.idle_seconds = idle_seconds

    @staticmethod
    def _key(session_id: str) -> str:
        import hashlib

        return hashlib.sha256(session_id.encode("utf-8")).hexdigest()

    def save(self, session_id: str, record: dict[str, Any]) -> None:
        self.database.save_host_session(self._key(session_id), record, self.idle_seconds)

    def resume(self, session_id: str) -> dict[str, Any] | None:
        return self.database.resume_host_session(self._key(session_id), self.idle_seconds)

    def forget(self, session_id: str) -> None:
        self.database.forget_host_session(self._key(session_id))


def approvals(url: str | None, profile: str) -> Callable[[str], bool] | None:
    """The database's pre-approved hashes of a profile as a predicate for policy.decide (asked
    only when a call needs a confirmation), or None without a state database."""
    if not url:
        return None
    database = Database.for_url(url)
    return lambda digest: database.is_approved(profile, digest)

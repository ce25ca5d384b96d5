"""Shared state in PostgreSQL (`[state] url` in the profile, or LLMC_STATE_URL): the audit chain,
the rate-limit windows and the pre-approved call hashes of every llmc that uses the same
database, on any machine, and the gateway's initialize-era host sessions (so that another replica
can resume one, and a DELETE through one ends it on all), and the gateway replicas' leases (so
that a survivor closes the calls of a replica that died as `lost`).

psycopg is imported only here, and only when a url is set (`pip install 'llmc-cli[postgres]'`).
One connection per url per process, reused by every call of a batch and every host of the
gateway (a lock serialises its use); a connection that broke is dropped and opened again on the
next use, so a database that comes back is used again without a restart. Any failure is a
StateError (exit 3) naming the database as host:port/dbname, never its password.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from llmc_cli.errors import ConfigError, optional_module
from llmc_cli.store.chain import GENESIS

if TYPE_CHECKING:
    import psycopg

URL_VAR = "LLMC_STATE_URL"
SCHEMA_VERSION = 6
AUDIT_LOCK = 0x6C6C6D63  # "llmc": the advisory lock that keeps the audit chain linear
SESSION_ENDED = "llmc_session_ended"  # NOTIFY channel; the payload is the SHA-256 of the ended session's id
LEASE_VAR = "LLMC_REPLICA_LEASE"
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

    _open: ClassVar[dict[str, Database]] = {}
    _open_lock = threading.Lock()
    # Where a long-running process (the gateway) says that a database became unreachable and that
    # it is back: once each way, however many requests fail meanwhile; None: nobody is told.
    outages: Callable[[str], None] | None = None
    _down: ClassVar[set[str]] = set()  # urls unreachable now, for every connection of this process

    def __init__(self, url: str) -> None:
        optional_module("psycopg", "postgres", f"[state] url ({URL_VAR})")  # every use of the database starts here
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
            Database.outages(f"the {self.name} is unreachable ({_clean(self.url, exc)}); what needs it is refused "
                             "until it is back")

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
        import psycopg  # present: checked when this Database was made

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.url, connect_timeout=5, application_name="llmc")
        return self._conn

    def run(self, what: str, work: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """work(cursor) in one transaction, committed; StateError saying `what` failed otherwise.
        A connection that broke is closed, so the next run opens a new one."""
        import psycopg

        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    done = work(cur)
            except psycopg.Error as exc:
                if self._conn is not None and (self._conn.broken or isinstance(exc, psycopg.OperationalError)):
                    self._conn.close()
                    self._conn = None
                if isinstance(exc, psycopg.OperationalError):
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
            raise StateError(f"the {self.name} has schema version {version}, llmc needs {SCHEMA_VERSION}: "
                             "run `llmc state migrate`")

    # -- the audit chain ---------------------------------------------------------------------------

    def append_chained(self, seal: Callable[[str, int], list[str]]) -> None:
        """Under the transaction-scoped advisory lock (every writer on every machine waits here, so
        the chain stays linear): read the head, seal(head, count) -> the new records as JSON text
        (each chained to the one before), insert them, move the head; one commit."""

        def work(cur: psycopg.Cursor[Any]) -> None:
            self.check_schema(cur)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
            self._append(cur, seal)

        self.run("cannot write the audit log", work)

    def _append(self, cur: psycopg.Cursor[Any], seal: Callable[[str, int], list[str]]) -> None:
        """Under the audit lock: seal after the head, insert, move the head, and keep this
        replica's open calls (opened by an allowed decision, closed by an outcome)."""
        import json

        cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
        row = cur.fetchone()
        head, count = (str(row[0]), int(row[1])) if row else (GENESIS, 0)
        lines = seal(head, count)
        cur.executemany("INSERT INTO llmc_audit (seq, record) VALUES (%s, %s)",
                        [(count + i + 1, line) for i, line in enumerate(lines)])
        new_head = json.loads(lines[-1])["hash"] if lines else head
        cur.execute("INSERT INTO llmc_audit_head (id, head, records) VALUES (1, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET head = excluded.head, records = excluded.records",
                    (new_head, count + len(lines)))
        if self.replica is None:
            return
        from llmc_cli.store.chain import call_key

        records = [json.loads(line) for line in lines]

        opened = [(self.replica, call_key(r), count + i + 1, lines[i]) for i, r in enumerate(records)
                  if r.get("event") == "decision" and r.get("decision") == "allow"]
        closed = [(self.replica, call_key(r)) for r in records if r.get("event") == "outcome"]
        if opened:
            # The lease is renewed with the decisions it covers: a replica never has open calls
            # without a live lease, even before its first heartbeat.
            cur.execute("INSERT INTO llmc_replica (id, lease_until) VALUES (%s, now() + make_interval(secs => %s)) "
                        "ON CONFLICT (id) DO UPDATE SET lease_until = "
                        "greatest(llmc_replica.lease_until, excluded.lease_until)", (self.replica, self.lease_seconds))
            cur.executemany("INSERT INTO llmc_open_call (replica, call_key, seq, record) VALUES (%s, %s, %s, %s)",
                            opened)
        if closed:
            cur.executemany("DELETE FROM llmc_open_call WHERE ctid = (SELECT ctid FROM llmc_open_call "
                            "WHERE replica = %s AND call_key = %s ORDER BY seq LIMIT 1)", closed)

    def close_lost_calls(self, seal_lost: Callable[[list[tuple[str, dict[str, Any]]]], Callable[[str, int], list[str]]]
                         ) -> int:
        """Close the open calls of every replica whose lease ran out: seal_lost([(replica, decision
        record)]) seals their outcome records, appended in the transaction that deletes the open
        calls, under the audit lock: several survivors close each call exactly once."""
        import json

        def work(cur: psycopg.Cursor[Any]) -> int:
            self.check_schema(cur)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
            cur.execute("DELETE FROM llmc_replica WHERE lease_until < now()")
            cur.execute("DELETE FROM llmc_open_call o WHERE NOT EXISTS "
                        "(SELECT 1 FROM llmc_replica r WHERE r.id = o.replica) RETURNING replica, seq, record")
            rows = sorted(cur.fetchall(), key=lambda row: int(row[1]))
            if rows:
                self._append(cur, seal_lost([(str(replica), json.loads(record)) for replica, _, record in rows]))
            return len(rows)

        return self.run("cannot close the calls of replicas that are gone", work)

    def renew_lease(self, replica: str, seconds: float) -> bool:
        """Renew a replica's lease; False when it had run out or was never taken (its open calls,
        if any, are then closed as lost by another replica)."""

        def work(cur: psycopg.Cursor[Any]) -> bool:
            cur.execute("SELECT lease_until >= now() FROM llmc_replica WHERE id = %s", (replica,))
            row = cur.fetchone()
            cur.execute("INSERT INTO llmc_replica (id, lease_until) VALUES (%s, now() + make_interval(secs => %s)) "
                        "ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until", (replica, seconds))
            return bool(row and row[0])

        return self.run("cannot renew the replica's lease", work)

    def end_lease(self, replica: str) -> None:
        """A replica stopping cleanly: gone at once, unless calls of it are still open (their
        outcomes could not be written): then its lease runs out and a survivor closes them."""

        def work(cur: psycopg.Cursor[Any]) -> None:
            cur.execute("DELETE FROM llmc_replica WHERE id = %s AND NOT EXISTS "
                        "(SELECT 1 FROM llmc_open_call WHERE replica = %s)", (replica, replica))

        self.run("cannot end the replica's lease", work)

    def audit_head(self) -> tuple[str, int] | None:
        def work(cur: psycopg.Cursor[Any]) -> tuple[str, int] | None:
            self.check_schema(cur)
            cur.execute("SELECT head, records FROM llmc_audit_head WHERE id = 1")
            row = cur.fetchone()
            return (str(row[0]), int(row[1])) if row else None

        return self.run("cannot read the audit head", work)

    def audit_records(self, after: int = 0, batch: int = 5000) -> Iterator[tuple[int, str]]:
        """(seq, JSON text) in chain order, read in pages (a long trail is not held in memory)."""
        while True:
            def page(cur: psycopg.Cursor[Any], start: int = after) -> list[tuple[int, str]]:
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

        def work(cur: psycopg.Cursor[Any]) -> tuple[str, int, float] | None:
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

        def work(cur: psycopg.Cursor[Any]) -> None:
            self.check_schema(cur)
            cur.execute("INSERT INTO llmc_approved (profile, hash, tool) VALUES (%s, %s, %s) "
                        "ON CONFLICT (profile, hash) DO NOTHING", (profile, digest, tool))

        self.run("cannot record the approval", work)

    def is_approved(self, profile: str, digest: str) -> bool:
        def work(cur: psycopg.Cursor[Any]) -> bool:
            self.check_schema(cur)
            cur.execute("SELECT 1 FROM llmc_approved WHERE profile = %s AND hash = %s", (profile, digest))
            return cur.fetchone() is not None

        return self.run("cannot read the approved calls", work)

    # -- cached tool results -----------------------------------------------------------------------

    def cached_result(self, key: str) -> str | None:
        def work(cur: psycopg.Cursor[Any]) -> str | None:
            self.check_schema(cur)
            cur.execute("SELECT result FROM llmc_result_cache WHERE key = %s AND expires_at > now()", (key,))
            row = cur.fetchone()
            return str(row[0]) if row else None

        return self.run("cannot read the result cache", work)

    def cache_result(self, key: str, server: str, result: str, ttl: float) -> None:
        """Store a result for ttl seconds; expired entries are swept out on the way."""

        def work(cur: psycopg.Cursor[Any]) -> None:
            self.check_schema(cur)
            cur.execute("DELETE FROM llmc_result_cache WHERE expires_at <= now()")
            cur.execute("INSERT INTO llmc_result_cache (key, server, result, expires_at) VALUES "
                        "(%s, %s, %s, now() + make_interval(secs => %s)) ON CONFLICT (key) DO UPDATE SET "
                        "result = excluded.result, expires_at = excluded.expires_at", (key, server, result, ttl))

        self.run("cannot store the result", work)

    def clear_results(self, server: str | None) -> int:
        def work(cur: psycopg.Cursor[Any]) -> int:
            self.check_schema(cur)
            if server is None:
                cur.execute("DELETE FROM llmc_result_cache")
            else:
                cur.execute("DELETE FROM llmc_result_cache WHERE server = %s", (server,))
            return int(cur.rowcount)

        return self.run("cannot clear the result cache", work)

    # -- the gateway's host sessions ---------------------------------------------------------------

    def save_host_session(self, key: str, record: dict[str, Any], idle_seconds: float) -> None:
        """Keep a session's record; sessions idle longer than idle_seconds are swept out on the way."""
        from psycopg.types.json import Jsonb

        def work(cur: psycopg.Cursor[Any]) -> None:
            self.check_schema(cur)
            cur.execute("DELETE FROM llmc_host_session WHERE touched < now() - make_interval(secs => %s)",
                        (idle_seconds,))
            cur.execute("INSERT INTO llmc_host_session (id_sha256, record) VALUES (%s, %s) ON CONFLICT (id_sha256) "
                        "DO UPDATE SET record = excluded.record, touched = now()", (key, Jsonb(record)))

        self.run("cannot keep the session", work)

    def resume_host_session(self, key: str, idle_seconds: float) -> dict[str, Any] | None:
        """A session's record, marked as used now, unless it is unknown or idle too long."""

        def work(cur: psycopg.Cursor[Any]) -> dict[str, Any] | None:
            self.check_schema(cur)
            cur.execute("UPDATE llmc_host_session SET touched = now() WHERE id_sha256 = %s "
                        "AND touched >= now() - make_interval(secs => %s) RETURNING record", (key, idle_seconds))
            row = cur.fetchone()
            return dict(row[0]) if row else None

        return self.run("cannot read the session", work)

    def host_session_exists(self, key: str, idle_seconds: float) -> bool:
        """Whether a session is still open (read only: no write, no WAL flush per request)."""

        def work(cur: psycopg.Cursor[Any]) -> bool:
            cur.execute("SELECT 1 FROM llmc_host_session WHERE id_sha256 = %s "
                        "AND touched >= now() - make_interval(secs => %s)", (key, idle_seconds))
            return cur.fetchone() is not None

        return self.run("cannot read the session", work)

    def host_sessions_open(self, keys: list[str], idle_seconds: float) -> set[str]:
        def work(cur: psycopg.Cursor[Any]) -> set[str]:
            cur.execute("SELECT id_sha256 FROM llmc_host_session WHERE id_sha256 = ANY(%s) "
                        "AND touched >= now() - make_interval(secs => %s)", (keys, idle_seconds))
            return {str(row[0]) for row in cur.fetchall()}

        return self.run("cannot read the sessions", work)

    def forget_host_session(self, key: str) -> None:
        """End a session for every replica: gone from the table (what each replica checks per
        request) and announced (each replica's listener drops it from memory at once)."""

        def work(cur: psycopg.Cursor[Any]) -> None:
            cur.execute("DELETE FROM llmc_host_session WHERE id_sha256 = %s", (key,))
            cur.execute("SELECT pg_notify(%s, %s)", (SESSION_ENDED, key))

        self.run("cannot end the session", work)


def lease_seconds() -> float:
    """How long a gateway replica's lease lasts (LLMC_REPLICA_LEASE, seconds; default 30)."""
    text = os.environ.get(LEASE_VAR, "").strip()
    if not text:
        return LEASE_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0.5 <= seconds <= 86400:
        raise ConfigError(f"{LEASE_VAR}={text}: expected a number of seconds from 0.5 to 86400")
    return seconds


class PostgresHostSessions:
    """The gateway's shared sessions (gateway/http.py SharedSessions) in the state database: any
    replica resumes a session another one opened, and a session one replica ends is ended on all.
    Only the SHA-256 of a session id is stored.

    This replica also holds a lease in the database while it runs (`id`: host:pid:random), and
    its allowed calls stay open there until their outcome is in the chain; `run` renews the
    lease and closes the open calls of replicas whose lease ran out (`close_lost`, the audit's).
    Session checks have their own connection, so a request's check never waits behind an audit
    write."""

    def __init__(self, url: str, idle_seconds: float,
                 close_lost: Callable[[str], int] | None = None) -> None:
        import secrets
        import socket

        self.database = Database(url)  # its own connection: checked once per request
        self.audit_database = Database.for_url(url)  # the connection the audit chain is written through
        self.idle_seconds = idle_seconds
        self.lease_seconds = lease_seconds()
        self.id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.close_lost = close_lost

    @staticmethod
    def key(session_id: str) -> str:
        import hashlib

        return hashlib.sha256(session_id.encode("utf-8")).hexdigest()

    def _reachable(self, what: str) -> Database:
        """The sessions' database, unless it is known to be unreachable: then a request is refused
        at once rather than wait for a connection timeout while holding the connection's lock
        (every other request would queue behind it). The listener and the lease, which retry on
        their own, find out when it is back."""
        if self.database.url in Database._down:
            raise StateError(f"{what} in the {self.database.name}: it is unreachable")
        return self.database

    def save(self, session_id: str, record: dict[str, Any]) -> None:
        self._reachable("cannot keep the session").save_host_session(self.key(session_id), record, self.idle_seconds)

    def resume(self, session_id: str) -> dict[str, Any] | None:
        return self._reachable("cannot read the session").resume_host_session(self.key(session_id), self.idle_seconds)

    def exists(self, session_id: str) -> bool:
        return self._reachable("cannot read the session").host_session_exists(self.key(session_id), self.idle_seconds)

    def forget(self, session_id: str) -> None:
        self.database.forget_host_session(self.key(session_id))

    def ready(self) -> bool:
        """The database answers with the schema this llmc needs: calls can be audited."""
        try:
            self.database.run("cannot reach the database", self.database.check_schema)
        except ConfigError:  # StateError, or psycopg missing
            return False
        return True

    # -- what runs beside the requests -------------------------------------------------------------

    def start(self, stopped: threading.Event, held: Callable[[], list[str]], ended: Callable[[str], None],
              log: Callable[[str], None]) -> None:
        """Until `stopped`: renew this replica's lease and close the calls of replicas that are
        gone (a thread), and end at once the sessions held here that another replica ended (a
        listener on its own connection: LISTEN, then a check of every session held, so an end
        announced while it was not listening is not missed either). `held`: the ids of the
        sessions held here; `ended(id)` ends one here. Outages are said through `log`, once."""
        Database.outages = log
        self.audit_database.replica = self.id
        self.audit_database.lease_seconds = self.lease_seconds
        threading.Thread(target=self._keep_lease, args=(stopped, log), daemon=True, name="llmc-replica-lease").start()
        threading.Thread(target=self._listen, args=(stopped, held, ended), daemon=True,
                         name="llmc-session-listener").start()

    def stop(self) -> None:
        try:
            self.audit_database.end_lease(self.id)
        except ConfigError:
            pass  # the lease runs out by itself

    def _keep_lease(self, stopped: threading.Event, log: Callable[[str], None]) -> None:
        import time

        held = False
        steady_since: float | None = None  # renewed without a failure since then
        while not stopped.is_set():
            try:
                renewed = self.audit_database.renew_lease(self.id, self.lease_seconds)
                if held and not renewed:
                    log(f"replica {self.id}: its lease ran out before it was renewed; another replica may have "
                        "closed its open calls as lost")
                held = True
                now = time.monotonic()
                steady_since = now if steady_since is None else steady_since
                # Only after a whole lease with the database: after an outage every live replica
                # renews its own lease first, and none is taken for dead.
                if self.close_lost is not None and now - steady_since >= self.lease_seconds:
                    closed = self.close_lost(self.id)
                    if closed:
                        log(f"closed {closed} call(s) of gateway replicas that are gone as lost (see `llmc audit tail "
                            "--outcome lost`)")
            except ConfigError:
                steady_since = None
            stopped.wait(self.lease_seconds / 3)

    def _listen(self, stopped: threading.Event, held: Callable[[], list[str]], ended: Callable[[str], None]) -> None:
        import psycopg

        database = self.database
        while not stopped.is_set():
            try:
                with psycopg.connect(database.url, autocommit=True, connect_timeout=5,
                                     application_name="llmc-listener") as conn:
                    conn.execute(f"LISTEN {SESSION_ENDED}")  # a fixed name
                    database.connection_works()
                    # Listening now: what ended before is no longer in the table.
                    ids = {self.key(sid): sid for sid in held()}
                    still = database.host_sessions_open(list(ids), self.idle_seconds) if ids else set()
                    for key in set(ids) - still:
                        ended(ids[key])
                    while not stopped.is_set():
                        for notice in conn.notifies(timeout=1.0):
                            sid = {self.key(s): s for s in held()}.get(notice.payload)
                            if sid is not None:
                                ended(sid)
            except (psycopg.Error, ConfigError) as exc:
                if isinstance(exc, psycopg.OperationalError):
                    database.connection_failed(exc)
                stopped.wait(1.0)


def approvals(url: str | None, profile: str) -> Callable[[str], bool] | None:
    """The database's pre-approved hashes of a profile as a predicate for policy.decide (asked
    only when a call needs a confirmation), or None without a state database."""
    if not url:
        return None
    database = Database.for_url(url)
    return lambda digest: database.is_approved(profile, digest)

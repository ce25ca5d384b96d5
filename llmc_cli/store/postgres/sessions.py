"""The gateway's initialize-era host sessions in the state database (HostSessions), so that another
replica can resume one and a DELETE through one ends it on all; and the replicas' leases, so that
a survivor closes the calls of a replica that died as `lost` (postgres/chain.py keeps them open).
A session is a row keyed by the SHA-256 of its id (the id is a bearer secret: whoever reads the
table must not be able to ride on a session); the database's clock decides idleness, so replicas
with skewed clocks agree."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llmc_cli.errors import ConfigError
from llmc_cli.model import JSONObject
from llmc_cli.store.postgres import LEASE_SECONDS, Database, StateError

if TYPE_CHECKING:
    import psycopg

SESSION_ENDED = "llmc_session_ended"  # NOTIFY channel; the payload is the SHA-256 of the ended session's id
LEASE_VAR = "LLMC_REPLICA_LEASE"


def save_row(db: Database, key: str, record: JSONObject, idle_seconds: float) -> None:
    """Keep a session's record; sessions idle longer than idle_seconds are swept out on the way."""
    from psycopg.types.json import Jsonb

    def work(cur: psycopg.Cursor[Any]) -> None:
        db.check_schema(cur)
        cur.execute("DELETE FROM llmc_host_session WHERE touched < now() - make_interval(secs => %s)", (idle_seconds,))
        cur.execute(
            "INSERT INTO llmc_host_session (id_sha256, record) VALUES (%s, %s) ON CONFLICT (id_sha256) "
            "DO UPDATE SET record = excluded.record, touched = now()",
            (key, Jsonb(record)),
        )

    db.run("cannot keep the session", work)


def resume_row(db: Database, key: str, idle_seconds: float) -> JSONObject | None:
    """A session's record, marked as used now, unless it is unknown or idle too long."""

    def work(cur: psycopg.Cursor[Any]) -> JSONObject | None:
        db.check_schema(cur)
        cur.execute(
            "UPDATE llmc_host_session SET touched = now() WHERE id_sha256 = %s "
            "AND touched >= now() - make_interval(secs => %s) RETURNING record",
            (key, idle_seconds),
        )
        row = cur.fetchone()
        return dict(row[0]) if row else None

    return db.run("cannot read the session", work)


def row_exists(db: Database, key: str, idle_seconds: float) -> bool:
    """Whether a session is still open (read only: no write, no WAL flush per request)."""

    def work(cur: psycopg.Cursor[Any]) -> bool:
        cur.execute(
            "SELECT 1 FROM llmc_host_session WHERE id_sha256 = %s AND touched >= now() - make_interval(secs => %s)",
            (key, idle_seconds),
        )
        return cur.fetchone() is not None

    return db.run("cannot read the session", work)


def rows_open(db: Database, keys: list[str], idle_seconds: float) -> set[str]:
    def work(cur: psycopg.Cursor[Any]) -> set[str]:
        cur.execute(
            "SELECT id_sha256 FROM llmc_host_session WHERE id_sha256 = ANY(%s) AND touched >= now() - make_interval(secs => %s)",
            (keys, idle_seconds),
        )
        return {str(row[0]) for row in cur.fetchall()}

    return db.run("cannot read the sessions", work)


def forget_row(db: Database, key: str) -> None:
    """End a session for every replica: gone from the table (what each replica checks per
    request) and announced (each replica's listener drops it from memory at once)."""

    def work(cur: psycopg.Cursor[Any]) -> None:
        cur.execute("DELETE FROM llmc_host_session WHERE id_sha256 = %s", (key,))
        cur.execute("SELECT pg_notify(%s, %s)", (SESSION_ENDED, key))

    db.run("cannot end the session", work)


def renew_lease(db: Database, replica: str, seconds: float) -> bool:
    """Renew a replica's lease; False when it had run out or was never taken (its open calls,
    if any, are then closed as lost by another replica)."""

    def work(cur: psycopg.Cursor[Any]) -> bool:
        cur.execute("SELECT lease_until >= now() FROM llmc_replica WHERE id = %s", (replica,))
        row = cur.fetchone()
        cur.execute(
            "INSERT INTO llmc_replica (id, lease_until) VALUES (%s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until",
            (replica, seconds),
        )
        return bool(row and row[0])

    return db.run("cannot renew the replica's lease", work)


def end_lease(db: Database, replica: str) -> None:
    """A replica stopping cleanly: gone at once, unless calls of it are still open (their
    outcomes could not be written): then its lease runs out and a survivor closes them."""

    def work(cur: psycopg.Cursor[Any]) -> None:
        cur.execute(
            "DELETE FROM llmc_replica WHERE id = %s AND NOT EXISTS (SELECT 1 FROM llmc_open_call WHERE replica = %s)",
            (replica, replica),
        )

    db.run("cannot end the replica's lease", work)


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
    """The gateway's shared sessions (store/state.py HostSessions) in the state database: any
    replica resumes a session another one opened, and a session one replica ends is ended on all.
    Only the SHA-256 of a session id is stored.

    This replica also holds a lease in the database while it runs (`id`: host:pid:random), and
    its allowed calls stay open there until their outcome is in the chain; `run` renews the
    lease and closes the open calls of replicas whose lease ran out (`close_lost`, the audit's).
    Session checks have their own connection, so a request's check never waits behind an audit
    write."""

    def __init__(self, url: str, idle_seconds: float, close_lost: Callable[[str], int] | None = None) -> None:

        self.database = Database(url)  # its own connection: checked once per request
        self.audit_database = Database.for_url(url)  # the connection the audit chain is written through
        self.idle_seconds = idle_seconds
        self.lease_seconds = lease_seconds()
        self.id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.close_lost = close_lost

    @staticmethod
    def key(session_id: str) -> str:

        return hashlib.sha256(session_id.encode("utf-8")).hexdigest()

    def _reachable(self, what: str) -> Database:
        """The sessions' database, unless it is known to be unreachable: then a request is refused
        at once rather than wait for a connection timeout while holding the connection's lock
        (every other request would queue behind it). The listener and the lease, which retry on
        their own, find out when it is back."""
        if self.database.url in Database._down:
            raise StateError(f"{what} in the {self.database.name}: it is unreachable")
        return self.database

    def save(self, session_id: str, record: JSONObject) -> None:
        save_row(self._reachable("cannot keep the session"), self.key(session_id), record, self.idle_seconds)

    def resume(self, session_id: str) -> JSONObject | None:
        return resume_row(self._reachable("cannot read the session"), self.key(session_id), self.idle_seconds)

    def exists(self, session_id: str) -> bool:
        return row_exists(self._reachable("cannot read the session"), self.key(session_id), self.idle_seconds)

    def forget(self, session_id: str) -> None:
        forget_row(self.database, self.key(session_id))

    def ready(self) -> bool:
        """The database answers with the schema this llmc needs: calls can be audited."""
        try:
            self.database.run("cannot reach the database", self.database.check_schema)
        except ConfigError:  # StateError, or psycopg missing
            return False
        return True

    # -- what runs beside the requests -------------------------------------------------------------

    def start(
        self, stopped: threading.Event, held: Callable[[], list[str]], ended: Callable[[str], None], log: Callable[[str], None]
    ) -> None:
        """Until `stopped`: renew this replica's lease and close the calls of replicas that are
        gone (a thread), and end at once the sessions held here that another replica ended (a
        listener on its own connection: LISTEN, then a check of every session held, so an end
        announced while it was not listening is not missed either). `held`: the ids of the
        sessions held here; `ended(id)` ends one here. Outages are said through `log`, once."""
        Database.outages = log
        self.audit_database.replica = self.id
        self.audit_database.lease_seconds = self.lease_seconds
        threading.Thread(target=self._keep_lease, args=(stopped, log), daemon=True, name="llmc-replica-lease").start()
        threading.Thread(target=self._listen, args=(stopped, held, ended), daemon=True, name="llmc-session-listener").start()

    def stop(self) -> None:
        try:
            end_lease(self.audit_database, self.id)
        except ConfigError:
            pass  # the lease runs out by itself

    def _keep_lease(self, stopped: threading.Event, log: Callable[[str], None]) -> None:

        held = False
        steady_since: float | None = None  # renewed without a failure since then
        while not stopped.is_set():
            try:
                renewed = renew_lease(self.audit_database, self.id, self.lease_seconds)
                if held and not renewed:
                    log(
                        f"replica {self.id}: its lease ran out before it was renewed; another replica may have "
                        "closed its open calls as lost"
                    )
                held = True
                now = time.monotonic()
                steady_since = now if steady_since is None else steady_since
                # Only after a whole lease with the database: after an outage every live replica
                # renews its own lease first, and none is taken for dead.
                if self.close_lost is not None and now - steady_since >= self.lease_seconds:
                    closed = self.close_lost(self.id)
                    if closed:
                        log(
                            f"closed {closed} call(s) of gateway replicas that are gone as lost (see `llmc audit tail "
                            "--outcome lost`)"
                        )
            except ConfigError:
                steady_since = None
            stopped.wait(self.lease_seconds / 3)

    def _listen(self, stopped: threading.Event, held: Callable[[], list[str]], ended: Callable[[str], None]) -> None:
        import psycopg

        database = self.database
        while not stopped.is_set():
            try:
                with psycopg.connect(database.url, autocommit=True, connect_timeout=5, application_name="llmc-listener") as conn:
                    conn.execute(f"LISTEN {SESSION_ENDED}")  # a fixed name
                    database.connection_works()
                    # Listening now: what ended before is no longer in the table.
                    ids = {self.key(sid): sid for sid in held()}
                    still = rows_open(database, list(ids), self.idle_seconds) if ids else set()
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

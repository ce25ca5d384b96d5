"""The audit trail: one append-only JSON Lines file, one record per policy decision and per
outcome, each carrying the hash of the record before it (a hash chain), so an edited, removed or
reordered line is found by `verify`.

Appends are serialised across processes with a file lock and written whole (short writes are
continued) followed by fsync; a write that fails part-way is cut back to the last complete record,
so a full disk never leaves half a line that would stop every later call. Files rotate by size
(`audit.jsonl.1`, `.2`, ...); the chain runs on across files, and `verify` walks them oldest first.
A record that cannot be written stops the tool call before it runs (AuditError, exit 3): there is
no unaudited action.

The anchor (`audit.jsonl.anchor`, 0600) holds the head hash and the record count, replaced
atomically under the same lock with every append. The chain alone shows an edited, removed or
reordered record; with the anchor, `verify` also sees the end cut off, the whole log deleted and
the chain rewritten from a point on (unless the anchor was rewritten too: only a head recorded
elsewhere, checked with `verify --expect`, catches that).
"""

from __future__ import annotations

import functools
import getpass
import hashlib
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from llmc_cli.config.secrets import is_secret_name
from llmc_cli.errors import ConfigError
from llmc_cli.mcp.jsonrpc import replace_lone_surrogates
from llmc_cli.model import canonical_json
from llmc_cli.store.chain import GENESIS
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
MASK = "***"


class AuditError(ConfigError):
    """The audit log cannot be written: the action must not happen."""


def default_path() -> Path:
    from llmc_cli.config.paths import state_dir

    return state_dir() / "audit.jsonl"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def identity() -> dict[str, Any]:
    return {**_user_and_host(), "pid": os.getpid()}


@functools.lru_cache(maxsize=1)
def _user_and_host() -> dict[str, str]:
    """Looked up once per process: a batch writes them into every record."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"user": user, "host": socket.gethostname()}


def mask_secrets(value: Any, secrets: set[str] | None = None) -> Any:
    """Values under secret-looking keys, and any string equal to (or containing) the value of a
    secret-looking environment variable, become '***'."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and is_secret_name(k) else mask_secrets(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, secrets) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
    return value


def secret_values() -> set[str]:
    return {v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 6}


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class AuditLog:
    def __init__(self, path: Path | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path).expanduser() if path else default_path()
        self.max_bytes = max_bytes
        self._tail: tuple[int, int] | None = None  # (inode, size) of the file after our last write
        self._tail_hash = GENESIS
        self._tail_count = 0

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        return self.append_many([record])[-1]

    def record(self, record: dict[str, Any], *, before_action: bool) -> None:
        """What call_tool writes through: every record on disk at once (see Deferred)."""
        try:
            self.append(record)
        except AuditError as exc:
            raise AuditError(f"{exc.message}; " + ("the tool was not run" if before_action else
                                                   "the call ran, but its outcome is not recorded")) from None

    def append_many(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chain and write records under the lock: whole lines, one fsync, then the anchor. Nothing
        is left behind when any step fails: the log is cut back to where it was."""
        from filelock import FileLock, Timeout

        from llmc_cli import interrupts
        from llmc_cli.config.paths import ensure_private_dir

        try:
            ensure_private_dir(self.path.parent)
            with FileLock(str(self.path) + ".lock", timeout=30, mode=0o600), interrupts.deferred():
                try:
                    seen = os.stat(self.path)
                except FileNotFoundError:
                    seen = None
                # The head is what this object wrote last, unless the file changed since
                # (another process appended, or rotated): then it comes from the anchor and the file.
                known = seen is not None and self._tail == (seen.st_ino, seen.st_size)
                prev, count = (self._tail_hash, self._tail_count) if known else self._head(seen)
                if seen is not None and seen.st_size >= self.max_bytes:
                    self._rotate()
                written, lines = [], []
                for record in records:
                    full = {"time": now_iso(), **replace_lone_surrogates(record), "prev": prev}
                    full["hash"] = prev = record_hash(full)
                    written.append(full)
                    lines.append(json.dumps(full, ensure_ascii=False, separators=(",", ":")) + "\n")
                count += len(written)
                after = self._write_whole("".join(lines).encode("utf-8"), prev, count)
                self._tail, self._tail_hash, self._tail_count = after, prev, count
                return written
        except (OSError, Timeout, ConfigError) as exc:  # ConfigError: the anchor or the directory
            raise AuditError(f"cannot write the audit log {self.path}: "
                             f"{getattr(exc, 'strerror', None) or getattr(exc, 'message', None) or exc}") from None

    def _write_whole(self, data: bytes, head: str, count: int) -> tuple[int, int]:
        """Append data in full (a write may be short on a full disk), fsync, update the anchor;
        on any failure cut the file back to its old end and re-raise. (inode, size) after."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            start = os.fstat(fd).st_size  # under the lock: nobody else appends meanwhile
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
                after = os.fstat(fd)
                self._write_anchor(head, count, after.st_ino, after.st_size)
            except BaseException:
                os.ftruncate(fd, start)
                os.fsync(fd)
                raise
            return after.st_ino, after.st_size
        finally:
            os.close(fd)

    @property
    def anchor_path(self) -> Path:
        return self.path.with_name(self.path.name + ".anchor")

    def anchor(self) -> dict[str, Any] | None:
        """The anchor as written with the last append; None when there is none."""
        try:
            data = json.loads(self.anchor_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise AuditError(f"cannot read the audit anchor {self.anchor_path}: {exc}") from None
        if not (isinstance(data, dict) and isinstance(data.get("head"), str) and isinstance(data.get("records"), int)):
            raise AuditError(f"the audit anchor {self.anchor_path} is damaged: run `llmc audit verify`")
        return data

    def head(self) -> dict[str, Any]:
        """What `llmc audit head` prints: the head hash and record count, read under the lock."""
        from filelock import FileLock, Timeout

        try:
            with FileLock(str(self.path) + ".lock", timeout=30, mode=0o600):
                anchor = self.anchor()
        except (OSError, Timeout) as exc:
            raise AuditError(f"cannot read the audit anchor {self.anchor_path}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        if anchor is None:
            if self.files():
                raise AuditError(f"the audit log has no anchor ({self.anchor_path}): it was written before llmc "
                                 "kept one, or the anchor was deleted; the next recorded call writes it")
            return {"head": GENESIS, "records": 0, "anchor": None}
        return {"head": anchor["head"], "records": anchor["records"], "anchor": str(self.anchor_path)}

    def _head(self, seen: os.stat_result | None) -> tuple[str, int]:
        """(last hash, record count) before an append: from the anchor when it describes the file
        as it is; else counted from the files (a log from before anchors, or a crash between the
        log write and the anchor write)."""
        anchor = self.anchor()
        if anchor is not None and seen is not None and (anchor.get("inode"), anchor.get("size")) == \
                (seen.st_ino, seen.st_size):
            return anchor["head"], anchor["records"]
        count = sum(1 for _ in self.records())
        # Never below the anchor: records cut off or deleted must stay visible to `verify`
        # after later appends, not be counted away.
        return self._last_hash(), max(count, anchor["records"] if anchor else 0)

    def _write_anchor(self, head: str, count: int, inode: int, size: int) -> None:
        """Replace the anchor all or nothing, 0600 (config.files.write_atomic: temp file, fsync,
        rename, directory fsync so the new anchor survives a crash)."""
        from llmc_cli.config.files import write_atomic

        body = json.dumps({"head": head, "records": count, "inode": inode, "size": size, "time": now_iso()})
        write_atomic(self.anchor_path, body)

    def files(self) -> list[Path]:
        """Oldest first: audit.jsonl.N ... audit.jsonl.1, audit.jsonl."""
        rotated = sorted((p for p in self.path.parent.glob(self.path.name + ".*") if p.suffix[1:].isdigit()),
                         key=lambda p: -int(p.suffix[1:]))
        return rotated + ([self.path] if self.path.exists() else [])

    def records(self) -> Iterator[tuple[Path, int, str]]:
        for path in self.files():
            with open(path, encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh, 1):
                    yield path, number, line

    def _last_hash(self) -> str:
        for path in reversed(self.files()):
            last = _last_line(path)
            if last:
                try:
                    return str(json.loads(last)["hash"])
                except (ValueError, KeyError, TypeError):
                    raise AuditError(f"the audit log {path} ends with a damaged record: run `llmc audit verify`") from None
        return GENESIS

    def _rotate(self) -> None:
        # Oldest first, so no file overwrites another; none is deleted: an audit trail is kept.
        for path in self.files()[:-1]:
            os.replace(path, path.with_suffix(f".{int(path.suffix[1:]) + 1}"))
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))

    def verify(self, expect: str | None = None) -> dict[str, Any]:
        """Walk the chain; then compare with the anchor (its head must be the record at its count:
        records appended after it are fine, a chain cut or rewritten before it is not), and with
        `expect`, a head recorded elsewhere (it must be somewhere in the chain)."""
        anchor = self.anchor()  # read first: appends during the walk only add records after it
        prev, count, anchored, expected = GENESIS, 0, anchor is not None and anchor["records"] == 0, None
        for path, number, line in self.records():
            where = {"file": str(path), "line": number}
            try:
                record = json.loads(line)
                stored = record["hash"]
            except (ValueError, KeyError, TypeError):
                return {"ok": False, "records": count, **where, "reason": "not a valid audit record"}
            if record.get("prev") != prev:
                return {"ok": False, "records": count, **where,
                        "reason": "broken link: a record before this one was removed, added or reordered"}
            if record_hash(record) != stored:
                return {"ok": False, "records": count, **where, "reason": "record was modified (hash mismatch)"}
            prev, count = stored, count + 1
            if anchor is not None and count == anchor["records"]:
                if stored != anchor["head"]:
                    return {"ok": False, "records": count, **where,
                            "reason": "the chain differs from its anchor: rewritten from this record back"}
                anchored = True
            if expect is not None and stored == expect:
                expected = where
        report: dict[str, Any] = {"ok": True, "records": count, "files": [str(p) for p in self.files()],
                                  "last": prev, "anchor": anchor and {"head": anchor["head"], "records": anchor["records"]}}
        where = {"file": str(self.path), "line": None}
        if anchor is None and count:
            return {**report, "ok": False, **where, "reason": f"no anchor ({self.anchor_path}): the end of the log "
                    "cannot be checked (it is deleted, or the log was written before llmc kept one; "
                    "the next recorded call writes it)"}
        if anchor is not None and not anchored:
            what = "the audit log is missing" if not self.files() else "the log ends before its anchor"
            return {**report, "ok": False, **where,
                    "reason": f"{what}: the anchor counts {anchor['records']} records, the log has {count} "
                              "(records were cut off or deleted)"}
        if expect is not None:
            report["expect"] = expect
            if expected is None and expect != GENESIS:
                return {**report, "ok": False, **where,
                        "reason": f"the expected head {expect} is not in the chain (records were cut off, "
                                  "deleted or rewritten after it was recorded)"}
        return report


def open_log(profile: Any) -> "AuditLog":
    """The audit trail of a profile (config.schema.Profile): in the state database when `[state]
    url` or LLMC_STATE_URL names one, else the JSON Lines file."""
    from llmc_cli.store.postgres import state_url

    url = state_url(profile.state.url)
    return PostgresAuditLog(url) if url else AuditLog(profile.audit_log)


class PostgresAuditLog(AuditLog):
    """The same hash chain, records and anchor in PostgreSQL (store/postgres.py): the anchor is the
    head row, moved in the transaction that appends, under an advisory lock every writer on every
    machine takes, so there is one linear chain. `verify`, `tail` and `head` read it as they read
    the file; a record is one row (`file` in reports is the database, `line` the row's seq)."""

    def __init__(self, url: str) -> None:
        from llmc_cli.store.postgres import Database

        self.db = Database.for_url(url)
        self.path = Path(self.db.name)  # only ever shown, never opened
        self.max_bytes = 0

    def append_many(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from llmc_cli import interrupts
        from llmc_cli.store.postgres import StateError

        written: list[dict[str, Any]] = []

        def seal(prev: str, count: int) -> list[str]:
            written.clear()  # a retried transaction seals again
            lines = []
            for record in records:
                full = {"time": now_iso(), **replace_lone_surrogates(record), "prev": prev}
                full["hash"] = prev = record_hash(full)
                written.append(full)
                lines.append(json.dumps(full, ensure_ascii=False, separators=(",", ":")))
            return lines

        try:
            with interrupts.deferred():
                self.db.append_chained(seal)
        except StateError as exc:
            raise AuditError(exc.message) from None
        return written

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


class Deferred:
    """The audit trail of a batch (a context manager). Records written before an action
    (decisions) go to disk at once, as always, taking every waiting outcome with them in the
    same write and fsync; outcome records wait in memory for at most FLUSH_RECORDS records or
    FLUSH_SECONDS (a background flush), keeping the time they were recorded at. Leaving the
    context writes what is left."""

    FLUSH_RECORDS = 64
    FLUSH_SECONDS = 1.0

    def __init__(self, log: AuditLog) -> None:
        import threading

        self.log = log
        self.pending: list[dict[str, Any]] = []
        self.lock = threading.Lock()  # one batch runs servers in threads; the gateway serves hosts in threads
        self.queue_lock = threading.Lock()
        self.queued: list[dict[str, Any]] = []  # decision records waiting for the next write
        self.closed = threading.Event()
        self.flusher = threading.Thread(target=self._flush_every_second, daemon=True, name="llmc-audit-flush")

    def __enter__(self) -> "Deferred":
        self.flusher.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.closed.set()
        self.flusher.join(timeout=self.FLUSH_SECONDS * 2)
        self.flush()

    def record(self, record: dict[str, Any], *, before_action: bool) -> None:
        if before_action:
            self.record_before_actions([record])
            return
        with self.lock:
            self.pending.append({"time": now_iso(), **record})
            if len(self.pending) >= self.FLUSH_RECORDS:
                self._write([])

    def record_before_actions(self, records: list[dict[str, Any]]) -> None:
        """On disk before this returns. Concurrent callers (the gateway's hosts) share writes:
        while one write+fsync runs, the others queue, and the next writer takes every queued
        record in one write (group commit); each caller still returns only once its own are on disk."""
        import threading

        ticket: dict[str, Any] = {"records": records, "done": threading.Event(), "error": None}
        with self.queue_lock:
            self.queued.append(ticket)
        with self.lock:
            if not ticket["done"].is_set():
                with self.queue_lock:
                    batch, self.queued = self.queued, []
                try:
                    self._write([r for t in batch for r in t["records"]])
                except AuditError as exc:
                    for t in batch:
                        t["error"] = exc
                    raise
                finally:
                    for t in batch:
                        t["done"].set()
        if ticket["error"] is not None:
            raise ticket["error"]

    def flush(self) -> None:
        with self.lock:
            self._write([])

    def _flush_every_second(self) -> None:
        while not self.closed.wait(self.FLUSH_SECONDS):
            try:
                self.flush()
            except AuditError:
                pass  # the records stay pending; the next decision or the final flush reports it

    def _write(self, records: list[dict[str, Any]]) -> None:
        if self.pending or records:
            try:
                self.log.append_many([*self.pending, *records])
            except AuditError as exc:
                # The pending records stay: the next write (or the final flush) takes them.
                ran = f"{len(self.pending)} outcome records of calls that ran are not written yet"
                raise AuditError(f"{exc.message}; " + (f"no call was run ({ran})" if records and self.pending else
                                                       "no call was run" if records else ran)) from None
            self.pending = []


def _last_line(path: Path) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        block = min(size, 64 * 1024)
        while True:
            fh.seek(size - block)
            data = fh.read(block)
            lines = data.rstrip(b"\n").split(b"\n")
            if len(lines) > 1 or block == size:
                return lines[-1].decode("utf-8", "replace") if lines[-1] else ""
            block = min(size, block * 4)

"""The audit trail: one append-only JSON Lines file, one record per policy decision and per
outcome, each carrying the hash of the record before it (a hash chain), so an edited, removed or
reordered line is found by `verify`.

Appends are serialised across processes with a file lock (within one, threads appending at once
share one lock hold, write, fsync and anchor update: audit/group.py) and written whole (short writes are
continued) followed by fsync; a write that fails part-way is cut back to the last complete record,
so a full disk never leaves half a line that would stop every later call. Files rotate by size
(`audit.jsonl.1`, `.2`, ...); the chain runs on across files, and `verify` walks them oldest first.
A record that cannot be written stops the tool call before it runs (AuditError, exit 3): there is
no unaudited action.

The anchor (`audit.jsonl.anchor`, 0600) holds the head hash and the record count, rewritten in
place under the same lock with every append: one 512-byte write at offset 0, which a disk writes
whole (a sector), as PostgreSQL keeps pg_control within 512 bytes to update it in place. A
rename over it costs as much as the record's own fsync on ext4 (it flushes the new file's data);
readers take the lock, so none sees a write half done. The chain alone shows an edited, removed or
reordered record; with the anchor, `verify` also sees the end cut off, the whole log deleted and
the chain rewritten from a point on (unless the anchor was rewritten too: only a head recorded
elsewhere, checked with `verify --expect`, catches that).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from llmc_cli import interrupts
from llmc_cli.audit import group
from llmc_cli.audit.group import Seal, Ticket
from llmc_cli.audit.records import AnchorDamaged, AuditError, now_iso
from llmc_cli.audit.trail import ChainedLog
from llmc_cli.config.files import LockTimeout, file_lock, open_own, write_atomic
from llmc_cli.config.paths import audit_log_path, ensure_private_dir
from llmc_cli.errors import ConfigError
from llmc_cli.store.chain import GENESIS

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
LOCK_SECONDS = 30.0  # how long an append waits for another process's
ANCHOR_BYTES = 512  # one sector: written whole or not at all (JSON, padded with spaces)


def anchor_text(head: str, count: int, inode: int, size: int, when: str) -> bytes:
    """The anchor's JSON, as json.dumps writes {"head", "records", "inode", "size", "time"}, made
    directly: an anchor is rewritten with every decision, and this is a quarter of json.dumps's
    time (the strings go through json's own escaping)."""
    return b'{"head": %s, "records": %d, "inode": %d, "size": %d, "time": %s}' % (
        encode_basestring_ascii(head).encode("ascii"),
        count,
        inode,
        size,
        encode_basestring_ascii(when).encode("ascii"),
    )


def default_path() -> Path:

    return audit_log_path()


class AuditLog(ChainedLog):
    """The chain in a JSON Lines file (see the module's docstring)."""

    def __init__(self, path: Path | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES, sync: str = "before_call") -> None:

        self.path = audit_log_path(path)
        # [audit] sync = "before_reply": an append whose anchor may wait (an allowed call's decision,
        # a Deferred's write) is written without its fdatasync, settle() makes it. Under the lock:
        # appends so written (_written), durable (_durable), whose sync failed ((after, upto]).
        self.sync_later = sync == "before_reply"
        self._written = self._durable = 0
        self._failed: list[tuple[int, int]] = []
        self._sync_now = False  # the group being written holds a settle() or another log's append
        self.max_bytes = max_bytes
        self._tail: tuple[int, int] | None = None  # (inode, size) of the file after our last write
        self._tail_hash = GENESIS
        self._tail_count = 0
        # Appends of this process to this file, grouped (audit/group.py): one writer at a time,
        # so the lock, the file descriptors and the tail below are used by one thread at a time.
        self._appends = group.queue_of(str(self.path))
        # path -> (descriptor, device, inode): the log's and the anchor's descriptors, kept open
        # across appends (opening one through open_own is most of an append's CPU beside its
        # fsync); used only under the file lock, and only while the name still is that file.
        self._kept: dict[Path, tuple[int, int, int]] = {}
        # The lock file's descriptor, kept likewise (opening it is a quarter of an append's CPU
        # beside its fsync); flock is per open file, so threads of this process sharing it take
        # turns by _turn first.
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._anchor_path = self.path.with_name(self.path.name + ".anchor")  # made once: a Path costs per append
        # The names as str for the lstat of every append (a Path is converted each time).
        self._name, self._lock_name, self._anchor_name = str(self.path), str(self._lock_path), str(self._anchor_path)
        self._lock_kept: tuple[int, int, int] | None = None
        self._turn = threading.Lock()

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        kept = [*getattr(self, "_kept", {}).values(), *filter(None, [getattr(self, "_lock_kept", None)])]
        for fd, _dev, _ino in kept:  # os may be gone at exit: _close is bound
            try:
                _close(fd)
            except OSError:
                pass

    def _descriptor(self, path: Path, flags: int, seen: os.stat_result | None) -> tuple[int, int]:
        """A descriptor of `path` as open_own gives it (never through a link, a regular file with
        one name), and the file's size: the kept one while `seen` (the name's lstat in this lock
        hold, None when there is none) is still that same regular file with one name; otherwise
        (rotated, replaced, removed, linked) opened anew, with open_own's checks and errors, and
        kept for the next append."""
        kept = self._kept.get(path)
        if kept is not None:
            if seen is not None and _names_kept(seen, kept):
                return kept[0], seen.st_size
            self._drop(path)
        fd = open_own(path, flags)
        opened = os.fstat(fd)
        self._kept[path] = (fd, opened.st_dev, opened.st_ino)
        return fd, opened.st_size

    def release(self) -> None:
        if self._turn.acquire(timeout=1.0):  # an append stuck on a dead disk keeps them: __del__ closes them
            try:
                self._drop()
                self._drop_lock()
            finally:
                self._turn.release()

    def _lock(self) -> int:
        """config.files.file_lock on the log's lock file, through the kept descriptor (opened
        anew when the name is no longer that file); the descriptor to _unlock. Two plain
        methods, not a context manager: they run twice with every append."""
        deadline = time.monotonic() + LOCK_SECONDS
        if not self._turn.acquire(timeout=LOCK_SECONDS):  # as long as file_lock waits for another process
            raise LockTimeout(str(self._lock_path))
        try:
            return self._hold_lock(deadline)
        except BaseException:
            self._turn.release()
            raise

    def _unlock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._turn.release()

    def _hold_lock(self, deadline: float) -> int:
        """flock on the kept descriptor, polled until `deadline`; then one lstat: held when the
        name still is the file we locked (else it was replaced or removed before we got the lock,
        and the lock is on a file other processes no longer open: opened anew, locked again)."""
        delay = 0.001
        while True:
            fd = self._lock_descriptor()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(str(self._lock_path)) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                continue
            try:
                seen: os.stat_result | None = os.lstat(self._lock_name)
            except OSError:
                seen = None
            if seen is not None and self._lock_kept is not None and _names_kept(seen, self._lock_kept):
                return fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._drop_lock()
            if time.monotonic() >= deadline:
                raise LockTimeout(str(self._lock_path))

    def _lock_descriptor(self) -> int:
        if self._lock_kept is not None:
            return self._lock_kept[0]
        try:
            fd = open_own(self._lock_path, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:  # its directory does not exist (yet): made private
            ensure_private_dir(self.path.parent)
            fd = open_own(self._lock_path, os.O_RDWR | os.O_CREAT)
        opened = os.fstat(fd)
        self._lock_kept = (fd, opened.st_dev, opened.st_ino)
        return fd

    def _drop_lock(self) -> None:
        if self._lock_kept is not None:
            os.close(self._lock_kept[0])
            self._lock_kept = None

    def _drop(self, path: Path | None = None) -> None:
        """Close the kept descriptor of `path` (of every file when None); the log's made
        durable first when appends left their sync to settle() (a failure is kept for it)."""
        if self._durable < self._written and (path is None or path == self.path):
            try:
                self._settle_held()
            except OSError:
                pass  # in _failed: the settle() of those appends reports it
        for name in [path] if path is not None else list(self._kept):
            kept = self._kept.pop(name, None)
            if kept is not None:
                os.close(kept[0])

    def _append_chained(self, seal: Seal, anchor_later: bool = False) -> None:
        """Under the file lock: whole lines, one fsync, then the anchor (made durable here unless
        `anchor_later`). Nothing is left behind when any step fails: the log is cut back to where
        it was. Each file is judged once per lock hold, by one lstat of its name."""

        try:
            held = self._lock()
            try:
                with interrupts.deferred():
                    self._append_held(seal, anchor_later)
            finally:
                self._unlock(held)
        except (OSError, LockTimeout, ConfigError) as exc:  # ConfigError: the anchor or the directory
            raise AuditError(
                f"cannot write the audit log {self.path}: "
                f"{getattr(exc, 'strerror', None) or getattr(exc, 'message', None) or exc}"
            ) from None

    def _append_held(self, seal: Seal, anchor_later: bool) -> None:
        """_append_chained's work, with the lock held."""
        try:
            seen: os.stat_result | None = os.lstat(self._name)
        except FileNotFoundError:
            seen = None
        if seen is not None and not stat.S_ISREG(seen.st_mode):  # a link, a FIFO: never read or written
            raise OSError(errno.EINVAL, "not a regular file of llmc's own (a link or a FIFO is in its place)")
        # The head is what this process wrote last, unless the file changed since
        # (another process appended, or rotated): then it comes from the anchor and the file.
        known = seen is not None and self._tail == (seen.st_ino, seen.st_size)
        prev, count = (self._tail_hash, self._tail_count) if known else self._head(seen)
        lines = seal(prev, count)
        if not lines:  # sync() or settle(): the log's appends durable, then the anchor (durable for sync())
            self._settle_held()
            if seen is not None:
                self._write_anchor(prev, count, seen.st_ino, seen.st_size, later=anchor_later)
            return
        if seen is not None and seen.st_size >= self.max_bytes:
            self._drop()
            self._rotate()
            seen = None
        head = group.head_of(lines[-1])
        count += len(lines)
        lines.append(b"")  # the last line's end: one join, no generator and no string a line
        data = b"\n".join(lines)
        after = self._write_whole(data, seen, head, count, anchor_later)
        self._tail, self._tail_hash, self._tail_count = after, head, count

    def _write_whole(self, data: bytes, seen: os.stat_result | None, head: str, count: int, later: bool) -> tuple[int, int]:
        """Append data in full (a write may be short on a full disk), fsync, update the anchor;
        on any failure cut the file back to its old end and re-raise. (inode, size) after. Its
        size before is the lock hold's (`seen`): nobody else appends meanwhile."""
        try:
            fd, start = self._descriptor(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, seen)
            inode = self._kept[self.path][2]
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if later and self.sync_later and not self._sync_now:
                    # Synced by settle(); no anchor until then: one written back before the
                    # log's data could be ahead of the log after a machine crash.
                    self._written += 1
                else:
                    data_sync(fd)
                    self._durable = self._written
                    self._write_anchor(head, count, inode, start + len(data), later=later)
            except BaseException:
                os.ftruncate(fd, start)
                os.fsync(fd)
                self._durable = self._written
                raise
            return inode, start + len(data)
        except BaseException:
            self._drop()  # nothing kept from a write that failed: the next one opens afresh
            raise

    def _write_group(self, tickets: list[Ticket]) -> None:
        # A settle() in the group, or another log's append (its settle() would ask that log),
        # makes the group's write durable now.
        self._sync_now = any(t.seal is _nothing or t.owner is not self for t in tickets)
        super()._write_group(tickets)

    def mark(self) -> int:
        """What settle() takes: the appends written so far, to be made durable."""
        return self._written

    def settle(self, mark: int) -> None:
        """Appends up to `mark` durable when this returns ([audit] sync = "before_reply"): one
        fdatasync of the log under the lock unless another thread's did it already (shared, as
        a group's); AuditError when the sync that covered them failed."""
        if mark > self._durable:
            self._queue().append(Ticket(_nothing, True, self), self._write_group)
        for after, upto in self._failed:
            if after < mark <= upto:
                raise AuditError(f"cannot make the audit log {self.path} durable: the sync failed")

    def _settle_held(self) -> None:
        """Under the lock: fdatasync what appends wrote without it, by their descriptor; a failure is
        kept for their settle() (a retry proves nothing: a failed fdatasync may drop the pages)."""
        if self._durable >= self._written:
            return
        upto, kept = self._written, self._kept.get(self.path)
        try:
            if kept is None:
                raise OSError(errno.EIO, "the log was closed before it was made durable")
            data_sync(kept[0])
        except OSError:
            self._failed = [*self._failed[-63:], (self._durable, upto)]  # a settle() follows its append within a call
            raise
        finally:
            self._durable = upto

    @property
    def anchor_path(self) -> Path:
        return self._anchor_path

    def anchor(self) -> dict[str, Any] | None:
        """The anchor as written with the last append, read under the lock; None when there is none."""

        try:
            with file_lock(str(self.path) + ".lock", timeout=30):
                return self._read_anchor()
        except (OSError, LockTimeout) as exc:
            raise AuditError(
                f"cannot read the audit anchor {self.anchor_path}: {getattr(exc, 'strerror', None) or exc}"
            ) from None

    def _read_anchor(self) -> dict[str, Any] | None:
        """The anchor, read by a holder of the lock (it is rewritten in place)."""
        try:
            data = json.loads(self.anchor_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise AuditError(f"cannot read the audit anchor {self.anchor_path}: {exc.strerror or exc}") from None
        except ValueError:  # not JSON, not UTF-8: damaged as surely as a wrong shape below
            data = None
        if not (isinstance(data, dict) and isinstance(data.get("head"), str) and isinstance(data.get("records"), int)):
            raise AnchorDamaged(f"the audit anchor {self.anchor_path} is damaged: run `llmc audit verify`")
        return data

    def head(self) -> dict[str, Any]:
        """What `llmc audit head` prints: the head hash and record count, read under the lock."""
        anchor = self.anchor()
        if anchor is None:
            if self.files():
                raise AuditError(
                    f"the audit log has no anchor ({self.anchor_path}): it was written before llmc "
                    "kept one, or the anchor was deleted; the next recorded call writes it"
                )
            return {"head": GENESIS, "records": 0, "anchor": None}
        return {"head": anchor["head"], "records": anchor["records"], "anchor": str(self.anchor_path)}

    def _head(self, seen: os.stat_result | None) -> tuple[str, int]:
        """(last hash, record count) before an append: from the anchor when it describes the file
        as it is; else counted from the files (a log from before anchors, or a crash between the
        log write and the anchor write)."""
        anchor = self._read_anchor()
        if anchor is not None and seen is not None and (anchor.get("inode"), anchor.get("size")) == (seen.st_ino, seen.st_size):
            return anchor["head"], anchor["records"]
        count = sum(1 for _ in self.records())
        # Never below the anchor: records cut off or deleted must stay visible to `verify`
        # after later appends, not be counted away.
        return self._last_hash(), max(count, anchor["records"] if anchor else 0)

    def _write_anchor(self, head: str, count: int, inode: int, size: int, *, later: bool = False) -> None:
        """Rewrite the anchor in place (see the module's docstring), 0600. Made durable here, or,
        with lazy_anchor, by sync() within a second, or, `later`, by the next append (the
        outcome record of an allowed call: ChainedLog.record_before_actions): the records
        themselves are fsynced before any call runs, and a crash before then leaves an anchor
        that lags the log, which verify accepts (never one ahead)."""
        self._put_anchor(anchor_text(head, count, inode, size, now_iso()), durable=not later)

    def _put_anchor(self, body: bytes, *, durable: bool) -> None:
        data = body.ljust(ANCHOR_BYTES - 1) + b"\n"
        if len(data) != ANCHOR_BYTES:
            raise ConfigError(f"the audit anchor would exceed {ANCHOR_BYTES} bytes")  # a head is 64 hex digits: never
        try:
            seen: os.stat_result | None = os.lstat(self._anchor_name)
        except OSError:
            seen = None
        try:
            fd, size = self._descriptor(self.anchor_path, os.O_WRONLY, seen)
        except FileNotFoundError:
            # The first anchor is made whole under another name and renamed into place, so a full
            # disk or a crash never leaves an empty one behind (which would stop every later call):
            # durable whatever was asked (once in a log's life), or a crash could keep the rename
            # and lose the data.
            write_atomic(self.anchor_path, data, durable=True)
            return
        try:
            if os.pwrite(fd, data, 0) != ANCHOR_BYTES:  # a short write: the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if size > ANCHOR_BYTES:  # written longer by someone else: nothing may follow ours
                os.ftruncate(fd, ANCHOR_BYTES)
            if durable:
                data_sync(fd)
        except BaseException:
            self._drop(self.anchor_path)
            raise

    def flush(self) -> None:
        """Nothing waits in memory; an anchor left for later is made durable now."""
        self.sync()

    def sync(self) -> None:
        """Make the anchor durable (lazy_anchor, anchor_later): rewritten with the head, under
        the lock, and fsynced; queued with this process's appends (a group's anchor does it)."""
        if self._anchor_synced:
            return
        self._queue().append(Ticket(_nothing, False, self), self._write_group)

    def files(self) -> list[Path]:
        """Oldest first: audit.jsonl.N ... audit.jsonl.1, audit.jsonl."""
        rotated = sorted(
            (p for p in self.path.parent.glob(self.path.name + ".*") if p.suffix[1:].isdigit()), key=lambda p: -int(p.suffix[1:])
        )
        return rotated + ([self.path] if self.path.exists() else [])

    def records(self) -> Iterator[tuple[Path, int, str]]:
        """Every line, oldest file first. Readers take no lock, so the last line of the live file
        may be a record still being written: it is read again under the lock (once the writer is
        done); only a line still unterminated then (a writer killed mid-write) is handed out torn."""
        for path in self.files():
            with open(path, "rb") as fh:
                number = 0
                while raw := fh.readline():
                    if not raw.endswith(b"\n"):
                        start = fh.tell() - len(raw)
                        raw = self._settled_line(path, start, raw)
                        fh.seek(start + len(raw))
                    number += 1
                    yield path, number, raw.decode("utf-8", errors="replace")

    def _settled_line(self, path: Path, offset: int, seen: bytes) -> bytes:

        try:
            with file_lock(str(self.path) + ".lock", timeout=30), open(path, "rb") as fh:
                fh.seek(offset)
                return fh.readline() or seen
        except (OSError, LockTimeout):
            return seen

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


def data_sync(fd: int) -> None:
    """Make what was written to `fd` durable: fdatasync, which flushes the data and the metadata
    reading it back needs (an append's new length, a new block's place) but not the file's times
    (fsync's extra inode write; ~5-10 % of an append's sync here, bench/RESULTS.md session 10).
    fsync where the platform has no fdatasync."""
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)


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


def _nothing(prev: str, count: int) -> list[bytes]:
    return []


def _names_kept(seen: os.stat_result, kept: tuple[int, int, int]) -> bool:
    """Whether a name's lstat is the kept descriptor's file (device, inode): a regular file with one name."""
    return stat.S_ISREG(seen.st_mode) and seen.st_nlink == 1 and (seen.st_dev, seen.st_ino) == kept[1:]

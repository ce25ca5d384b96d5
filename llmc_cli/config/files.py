"""How llmc writes its files: one way each.

- `paths.ensure_private_dir`: every directory level llmc creates is 0700.
- `write_atomic`: all or nothing. Readers see the old file or the new one, never a torn one; a
  failure (a full disk, a read-only directory, Ctrl-C) leaves no temp file behind.
- `locked`: an exclusive lock across a read-modify-write, so concurrent llmc processes do not
  lose each other's changes (lock files are 0600, in the state directory's locks/).
- `open_own`: THE way llmc opens a file of its own for writing (audit log, anchor, locks, a
  keeper's log, every temp file of write_atomic). A server may control a directory beside llmc's
  files (a sandbox's `write_paths`), so no link is followed that llmc did not make: the parent is
  opened by its real path with O_NOFOLLOW|O_DIRECTORY and the file relative to it with
  O_NOFOLLOW (O_EXCL for a new name); what is opened must be a regular file with one name (no
  FIFO that would hang, no hard link to a file elsewhere). tests/test_layout.py checks that no
  other module opens a file for writing.

Every failure is a ConfigError (exit 3) that names the file: state or config cannot be written.
Callers writing mere caches catch it and carry on.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from llmc_cli.config.paths import ensure_private_dir, state_dir
from llmc_cli.errors import ConfigError
from llmc_cli.model import sha256

PRIVATE_FILE = 0o600
LOCK_TIMEOUT = 30.0  # seconds: a read-modify-write under a lock takes milliseconds; a minute means a stuck peer


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_own(path: Path | str, flags: int, mode: int = PRIVATE_FILE) -> int:
    """A descriptor of `path`, a file llmc writes, opened with `flags` (os.O_*) without following
    a link: the parent directory by its real path (links above it are the user's: they are
    resolved once, here), opened O_NOFOLLOW|O_DIRECTORY so it cannot be swapped for a link
    meanwhile; the file relative to it, O_NOFOLLOW. An existing file must be a regular file with
    a single name. OSError (errno ELOOP for a link, EMLINK for a hard link, EINVAL for a
    non-regular file) otherwise; nothing is created then (except what O_CREAT made: a new empty
    regular file of llmc's own)."""
    absolute = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(absolute)
    if not name:
        raise IsADirectoryError(errno.EISDIR, "a directory, not a file", absolute)
    dfd = os.open(os.path.realpath(parent), os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    try:
        try:
            fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
                raise OSError(
                    errno.ELOOP, "a symbolic link is in its place (llmc writes its own files, never through a link)", absolute
                ) from None
            raise
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (llmc writes its own files only)", absolute)
        if st.st_nlink > 1:
            raise OSError(errno.EMLINK, "the file has another name (a hard link): llmc does not write to it", absolute)
        if not flags & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomic(
    path: Path, data: str | bytes, mode: int | None = PRIVATE_FILE, *, durable: bool = True, follow_link: bool = False
) -> None:
    """Replace `path` with `data` all or nothing: a temp file beside it, written whole, fsynced,
    renamed over the target (and the directory fsynced, so the rename survives a crash).

    mode: the new file's permission bits; None for a file the user shares like any other
    (0666 minus the umask: exported manifests, tool lock files meant to be committed).
    durable=False skips the fsyncs, for caches (a cache lost in a crash costs only a miss).
    Missing parent directories are created 0700 (or, with mode None, like any the user makes).
    follow_link: a symlink in `path`'s place is written through, as open() would (a profile or a
    host's configuration linked from a dotfiles repository stays a link): only for files the
    user names and owns, never for llmc's state, whose links a server may have planted.
    Otherwise the temp file is made O_EXCL|O_NOFOLLOW in the real parent directory and renamed
    over the name (a link there is replaced, never followed)."""
    path = Path(path)
    if follow_link and path.is_symlink():
        path = path.resolve()
    if mode is None:
        _make_dirs(path)
    else:
        ensure_private_dir(path.parent)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp, fd = _create_temp(path, 0o666 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
        view = memoryview(payload)
        while view:  # os.write may write less than asked (a signal, a nearly full disk)
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
        closing, fd = fd, -1
        os.close(closing)
        os.replace(tmp, tmp.parent / path.name)  # in the directory the temp file was made in
        if durable:
            _fsync_dir(tmp.parent)
    except BaseException as exc:  # including KeyboardInterrupt: never leave the temp file
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


class LockTimeout(Exception):
    """file_lock waited `timeout` seconds and another process still held the lock."""


@contextmanager
def file_lock(lock_file: Path | str, timeout: float, mode: int = PRIVATE_FILE) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created with `mode`) for the duration of the block,
    across processes and threads: fcntl.flock on a descriptor of our own, polled until `timeout`
    (LockTimeout). What the filelock package does on POSIX, without its import (a fifth of a
    call's start-up). A lock file removed while we waited is opened again."""

    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fd = open_own(lock_file, os.O_RDWR | os.O_CREAT, mode)
        except FileNotFoundError:  # its directory does not exist yet (a first run): made private
            ensure_private_dir(Path(lock_file).parent)
            fd = open_own(lock_file, os.O_RDWR | os.O_CREAT, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise LockTimeout(str(lock_file)) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            continue
        except BaseException:
            os.close(fd)
            raise
        if os.fstat(fd).st_nlink == 0:  # removed (by a cleanup) between our open and our lock
            os.close(fd)
            continue
        break
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the lock of `path` exclusively for the duration of the block. Lock files live in the
    state directory's locks/ (0600), named after the file's resolved path: none appear beside a
    profile (a dotfiles repository, say), and every llmc of this user finds the same one."""

    real = Path(path).resolve()
    digest = sha256(str(real).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    lock_file = ensure_private_dir(state_dir() / "locks") / f"{real.name}.{digest}.lock"
    with ExitStack() as held:
        try:  # errors of taking the lock only, not of the block
            held.enter_context(file_lock(lock_file, timeout))
        except LockTimeout:
            raise ConfigError(f"{path} is locked by another llmc process (waited {timeout:g}s for {lock_file})") from None
        except OSError as exc:
            raise ConfigError(f"cannot lock {path}: {exc.strerror or exc}") from None
        yield


def _create_temp(path: Path, mode: int) -> tuple[Path, int]:
    """A new, uniquely named file beside `path` (like mkstemp, but the mode is ours: the kernel
    applies the umask to it, as it does for any file the user creates)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    real = Path(os.path.realpath(path.parent)) / path.name
    for _ in range(100):
        tmp = real.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")  # what secrets.token_hex does, without importing it
        try:
            return tmp, open_own(tmp, flags, mode)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    raise ConfigError(f"cannot write {path}: no unused temporary name beside it")


def _make_dirs(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # some filesystems do not open directories; the rename itself is done
    try:
        os.fsync(fd)
    except OSError:
        pass  # likewise: fsync on a directory is unsupported in places, and the data is in place
    finally:
        os.close(fd)


def private_temp_dir(prefix: str, longest: int = 4096) -> Path:
    """A new directory of our own under $TMPDIR (else, or when that would make the path longer
    than `longest`, /tmp): mode 0700, a random name, made by one mkdir that fails rather than
    reuse anything another user put there."""
    base = Path(os.environ.get("TMPDIR") or "/tmp")
    if len(str(base)) + len(prefix) + 13 > longest:
        base = Path("/tmp")
    for _ in range(100):
        path = base / f"{prefix}{os.urandom(6).hex()}"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name for a directory {prefix}... in {base}")

"""How llmc writes its files: one way each.

- `paths.ensure_private_dir`: every directory level llmc creates is 0700.
- `write_atomic`: all or nothing. Readers see the old file or the new one, never a torn one; a
  failure (a full disk, a read-only directory, Ctrl-C) leaves no temp file behind.
- `locked`: an exclusive lock across a read-modify-write, so concurrent llmc processes do not
  lose each other's changes (lock files are 0600, in the state directory's locks/).

Every failure is a ConfigError (exit 3) that names the file: state or config cannot be written.
Callers writing mere caches catch it and carry on.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from llmc_cli.config.paths import ensure_private_dir, state_dir
from llmc_cli.errors import ConfigError

PRIVATE_FILE = 0o600
LOCK_TIMEOUT = 30.0  # seconds: a read-modify-write under a lock takes milliseconds; a minute means a stuck peer


def write_atomic(path: Path, data: str | bytes, mode: int | None = PRIVATE_FILE, *, durable: bool = True) -> None:
    """Replace `path` with `data` all or nothing: a temp file beside it, written whole, fsynced,
    renamed over the target (and the directory fsynced, so the rename survives a crash).

    mode: the new file's permission bits; None for a file the user shares like any other
    (0666 minus the umask: exported manifests, tool lock files meant to be committed).
    durable=False skips the fsyncs, for caches (a cache lost in a crash costs only a miss).
    Missing parent directories are created 0700 (or, with mode None, like any the user makes).
    A symlink is written through, as open() would: a profile linked from a dotfiles repository
    stays a link."""
    path = Path(path)
    if path.is_symlink():
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
        os.replace(tmp, path)
        if durable:
            _fsync_dir(path.parent)
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
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        except FileNotFoundError:  # its directory does not exist yet (a first run): made private
            ensure_private_dir(Path(lock_file).parent)
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
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
    digest = hashlib.sha256(str(real).encode("utf-8", "surrogatepass")).hexdigest()[:16]
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
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")  # what secrets.token_hex does, without importing it
        try:
            return tmp, os.open(tmp, flags, mode)
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

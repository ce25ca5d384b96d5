"""The path jail: confinement of every path to the workspace roots, and llmc's own files off limits.

Two checks, because the file system can change between them: `resolve` turns the path a model
gave into a real path (symlinks and `..` resolved) and refuses it outside the roots; the `open_*`
functions then open that real path without following a symlink in its last component
(O_NOFOLLOW) and ask the kernel where the opened descriptor really is (/proc/self/fd), so a
symlink or directory swapped in after the check cannot lead outside. Files with more than one
hard link are refused: the other name may be outside the roots, and nothing tells where.
Directory walks descend through descriptors opened with O_NOFOLLOW, never through names.

llmc's own files (config and state directories, the profile file, its audit log and lock) are
off limits even inside a root, judged by IDENTITY as well as by name (see Protected): a model
that moved an ancestor directory away, edited the profile under its new name and moved it back
would otherwise have rewritten its own policy.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from llmc_cli.errors import ConfigError
from llmc_cli.mcp.tool_error import ToolError
from llmc_cli.server.sandbox import is_under

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang the server; non-regular files are refused after fstat.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


class Protected:
    """llmc's own files: every tool must leave them alone.

    Three views, because each alone has a hole:
    - names (as the kernel resolved them at start, a symbolic link AND its target): a protected
      path that does not exist yet cannot be created; a name beside a protected file that extends
      it (`audit.jsonl.1`, `audit.jsonl.lock`, `default.toml.lock`) counts as that file;
    - identities (st_dev, st_ino) of the protected objects: no other name (a hard link, a renamed
      ancestor) reaches them; a descriptor's chain of parents ("..") is checked against them, so
      "inside a protected directory" is what the kernel says, not what a path string says;
    - identities of every directory that contains one: such a directory cannot be moved away,
      replaced or deleted (that is how the profile was reached under another name).
    Identities are refreshed before every check, so a file llmc creates later (the audit log
    after a rotation, a state directory made by the first call) is covered too.
    """

    def __init__(self, paths: list[str]) -> None:
        """`paths`: files and directories; end a directory's path with "/" (it may not exist yet)."""
        self.names: list[str] = []
        self.dirs: list[str] = []  # names given with a trailing "/": directories, existing or not
        for path in paths:
            if not isinstance(path, str) or not path or "\0" in path:
                raise ConfigError(f"workspace: a protected path must be a path, got {path!r}")
            is_dir = path.endswith("/")
            path = os.path.abspath(os.path.expanduser(path))
            link = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            for name in (link, os.path.realpath(path)):
                if name not in self.names:
                    self.names.append(name)
                if is_dir and name not in self.dirs:
                    self.dirs.append(name)
        self.ids: set[tuple[int, int]] = set()
        self.ancestor_ids: set[tuple[int, int]] = set()
        self.refresh()

    def refresh(self) -> None:
        for name in self.names:
            st = _lstat(name)
            if st is not None:
                self.ids.add((st.st_dev, st.st_ino))
            parent = os.path.dirname(name)
            for _ in range(PATH_MAX_DEPTH):
                st = _lstat(parent)
                if st is not None:
                    self.ancestor_ids.add((st.st_dev, st.st_ino))
                if parent == "/":
                    break
                parent = os.path.dirname(parent)

    def covers(self, real: str) -> bool:
        """Is `real` a protected name, inside one, or a name that extends a protected one?"""
        head, tail = os.path.split(real)
        for name in self.names:
            if real == name or real.startswith(name.rstrip("/") + "/"):
                return True
            name_head, name_tail = os.path.split(name)
            if head == name_head and tail.startswith(name_tail + "."):
                return True
        return False

    def contains(self, real: str) -> bool:
        """Is `real` a directory name above a protected name?"""
        prefix = real.rstrip("/") + "/"
        return any(name.startswith(prefix) for name in self.names)

    def chain_hit(self, dfd: int) -> bool:
        """Is the directory open as `dfd`, or any directory above it, a protected object?"""
        st = os.fstat(dfd)
        fd = dfd
        try:
            for _ in range(PATH_MAX_DEPTH):
                if (st.st_dev, st.st_ino) in self.ids:
                    return True
                parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC, dir_fd=fd)
                if fd != dfd:
                    os.close(fd)
                fd = parent
                up = os.fstat(fd)
                if (up.st_dev, up.st_ino) == (st.st_dev, st.st_ino):
                    return False  # "/" is its own parent
                st = up
            return True  # deeper than any real path: refuse rather than guess
        finally:
            if fd != dfd:
                os.close(fd)


OFF_LIMITS = "refused: llmc's own configuration and state are off limits"
CONTAINS = "refused: it contains llmc's own configuration or state, which must stay where they are"
PATH_MAX_DEPTH = 4096


class Jail:
    def __init__(self, roots: list[str], protect: list[str] = ()) -> None:  # type: ignore[assignment]
        if not roots:
            raise ConfigError("workspace: at least one root directory is needed")
        self.roots: list[str] = []
        for root in roots:
            if not isinstance(root, str) or not root:
                raise ConfigError(f"workspace: root must be a directory path, got {root!r}")
            real = os.path.realpath(os.path.expanduser(root))
            if not os.path.isdir(real):
                raise ConfigError(f"workspace: root {root!r} is not a directory")
            if real not in self.roots:
                self.roots.append(real)
        # Off limits even inside a root: llmc's own configuration and state (profiles, tokens,
        # audit log). A model that could edit its profile could loosen its own policy.
        self.protected = Protected(list(protect))

    # ------------------------------------------------------------------ names
    def inside(self, real: str) -> bool:
        return is_under(real, self.roots) and not self.protected.covers(real)

    def resolve(self, path: str) -> str:
        """The real path of `path` (relative paths start at the first root), inside the roots."""
        if not isinstance(path, str) or not path:
            raise ToolError("path must be a non-empty string")
        if "\0" in path:
            raise ToolError("path contains a NUL byte")
        joined = path if os.path.isabs(path) else os.path.join(self.roots[0], path)
        try:
            real = os.path.realpath(joined)
        except OSError as exc:  # e.g. a link replaced while realpath walked it
            raise ToolError(f"{path}: refused: it changed while it was being checked ({exc.strerror})") from None
        if self.inside(real):
            return real
        if self.protected.covers(real):
            raise ToolError(f"{path}: {OFF_LIMITS}")
        if self.inside(os.path.normpath(joined)):
            raise ToolError(f"{path}: refused: a symbolic link in this path leads outside the workspace roots")
        if not os.path.isabs(path) and ".." in path.split(os.sep):
            raise ToolError(f"{path}: refused: '..' climbs out of the workspace roots")
        raise ToolError(f"{path}: refused: outside the workspace roots ({', '.join(self.roots)})")

    def relative(self, real: str) -> str:
        """How a result names a path: relative to the first root when inside it, else absolute."""
        root = self.roots[0]
        return os.path.relpath(real, root) if real == root or real.startswith(root.rstrip("/") + "/") else real

    # ------------------------------------------------------------------ descriptors
    def check_fd(self, fd: int, shown: str, *, directory: bool = False) -> None:
        """Refuse (and close) a descriptor that is not where the check said: outside the roots, or
        one of llmc's own files (by identity), or (a directory) inside one of them."""
        where = fd_path(fd)
        st = os.fstat(fd)
        self.protected.refresh()
        if (
            (st.st_dev, st.st_ino) in self.protected.ids
            or (where is not None and self.protected.covers(where))
            or (directory and self.protected.chain_hit(fd))
        ):
            os.close(fd)
            raise ToolError(f"{shown}: {OFF_LIMITS}")
        if where is not None and not is_under(where, self.roots):
            os.close(fd)
            raise ToolError(f"{shown}: refused: it changed after the check and now leads outside the workspace roots")

    def guard(self, dfd: int, name: str, shown: str) -> None:
        """Before `name` in the (checked) directory `dfd` is created, replaced, moved or deleted:
        refuse if it is one of llmc's own files or contains one, by identity or by name."""
        self.protected.refresh()
        st = lstat_at(dfd, name)
        if st is not None and (st.st_dev, st.st_ino) in self.protected.ids:
            raise ToolError(f"{shown}: {OFF_LIMITS}")
        if st is not None and (st.st_dev, st.st_ino) in self.protected.ancestor_ids:
            raise ToolError(f"{shown}: {CONTAINS}")
        where = fd_path(dfd)
        if where is None:
            return
        full = os.path.join(where, name)
        if self.protected.covers(full):
            raise ToolError(f"{shown}: {OFF_LIMITS}")
        if self.protected.contains(full):
            raise ToolError(f"{shown}: {CONTAINS}")

    def open_dir(self, real: str, shown: str) -> int:
        try:
            fd = os.open(real, _DIR_FLAGS)
        except OSError as exc:
            error = exc
            if os.path.islink(real):  # O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR: say what it is
                error = OSError(errno.ELOOP, "symbolic link")
            raise os_error(shown, error) from None
        self.check_fd(fd, shown, directory=True)
        return fd

    def open_read(self, real: str, shown: str) -> int:
        """A descriptor of the regular file at `real`, confined and with one link only. Opened
        through its (checked) parent directory, so the kernel's own chain of parents is judged."""
        dfd, name = self.parent(real, shown)
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
        except OSError as exc:
            raise os_error(shown, exc) from None
        finally:
            os.close(dfd)
        self.check_fd(fd, shown)
        check_regular(fd, shown)
        return fd

    def parent(self, real: str, shown: str) -> tuple[int, str]:
        """(descriptor of the parent directory, last name): writes go through the parent's fd."""
        parent, name = os.path.split(real)
        if not name:
            raise ToolError(f"{shown}: refused: not a file name")
        return self.open_dir(parent, shown), name

    def write_atomic(self, real: str, shown: str, data: bytes) -> bool:
        """Replace (or create) the file with `data`: written to a temporary file beside it, then
        renamed over it, so a failure never leaves it half-written. Returns True if created."""
        dfd, name = self.parent(real, shown)
        tmp = f".{name}.llmc-{os.urandom(4).hex()}.tmp"  # what secrets.token_hex does, without its imports
        try:
            self.guard(dfd, name, shown)
            existing = lstat_at(dfd, name)
            if existing is not None:
                refuse_special(existing, shown)
            mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
            try:
                _write_all(fd, data)
                if existing is not None:
                    os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return existing is None
        except OSError as exc:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise os_error(shown, exc) from None
        finally:
            os.close(dfd)

    def append(self, real: str, shown: str, data: bytes) -> bool:
        dfd, name = self.parent(real, shown)
        try:
            self.guard(dfd, name, shown)
            created = lstat_at(dfd, name) is None
            fd = os.open(
                name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, 0o666, dir_fd=dfd
            )
        except OSError as exc:
            raise os_error(shown, exc) from None
        finally:
            os.close(dfd)
        check_regular(fd, shown)  # before a single byte goes in (closes fd when it refuses)
        try:
            _write_all(fd, data)
        except OSError as exc:
            raise os_error(shown, exc) from None
        finally:
            os.close(fd)
        return created

    def walk(self, real_dir: str, shown: str, max_depth: int) -> Iterator[tuple[str, os.stat_result]]:
        """(path relative to real_dir, lstat) of every entry down to max_depth levels, sorted by
        name, never following a symbolic link."""
        fd = self.open_dir(real_dir, shown)
        try:
            self.protected.refresh()
            yield from _walk_fd(fd, "", max_depth, self.protected.ids)
        finally:
            os.close(fd)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _walk_fd(dfd: int, prefix: str, depth: int, skip: set[tuple[int, int]]) -> Iterator[tuple[str, os.stat_result]]:
    try:
        with os.scandir(dfd) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return  # unreadable directory: nothing to list
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        rel = prefix + entry.name
        yield rel, st
        if depth > 1 and stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in skip:
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue
            try:
                yield from _walk_fd(sub, rel + "/", depth - 1, skip)
            finally:
                os.close(sub)


def fd_path(fd: int) -> str | None:
    """Where an open descriptor really is, as the kernel sees it."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:  # macOS
        import fcntl

        raw = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
        return raw.split(b"\0", 1)[0].decode()
    except (OSError, ImportError, AttributeError):
        return None


def lstat_at(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def refuse_special(st: os.stat_result, shown: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise ToolError(f"{shown}: refused: it is a symbolic link (it changed after the check)")
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown}: refused: not a regular file")
    if st.st_nlink > 1:
        raise ToolError(
            f"{shown}: refused: the file has {st.st_nlink} hard links and another one may be outside the workspace roots"
        )


def check_regular(fd: int, shown: str) -> os.stat_result:
    st = os.fstat(fd)
    try:
        refuse_special(st, shown)
    except ToolError:
        os.close(fd)
        raise
    return st


def os_error(shown: str, exc: OSError) -> ToolError:
    if exc.errno == errno.ELOOP:
        return ToolError(f"{shown}: refused: it is a symbolic link (it changed after the check)")
    reasons = {
        errno.ENOENT: "not found",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EEXIST: "already exists",
        errno.ENOTDIR: "not a directory",
        errno.EISDIR: "is a directory",
        errno.ENOTEMPTY: "directory not empty",
        errno.ENOSPC: "no space left on the device",
        errno.EXDEV: "cannot move across file systems",
        errno.EROFS: "read-only file system",
    }
    return ToolError(f"{shown}: {reasons.get(exc.errno or 0, exc.strerror or str(exc))}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

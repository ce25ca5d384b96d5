"""Paths as the kernel resolves them, and the path globs of argument rules matched against them."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit

MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP beyond it): a longer chain is refused, not followed
MAX_NESTING = 64  # lists/objects under a ruled argument deeper than this are refused


class PathRefused(Exception):
    """A path argument llmc cannot judge safely; the call is denied with this reason."""


def touched_paths(value: str, cwd: str | None) -> list[str]:
    """The physical paths a server may touch when given the path `value`: resolved the way the
    kernel walks it, component by component, following each symlink where it is met (so
    `link/..` is the parent of the link's target, not the folder holding the link). A path whose
    last component is a symlink also names the link itself (unlink and rename act on the link,
    open on its target), so both are returned. Components that do not exist (yet) are taken as
    written; a `..` after one only cancels it. `~` is expanded, a `file:` URI read as its path,
    a relative path joined to `cwd` (the server's working directory; None: unknown, refused).
    Many servers normalise a path as text first (Node's path.resolve, Python's abspath) and so
    touch what the text means once `..` has eaten the link, so that reading is resolved and
    returned too: every reading a server may take must be allowed.
    Raises PathRefused for NUL bytes, symlink chains longer than the kernel follows (loops
    included), unreadable components, relative paths without a known cwd, and paths into a
    process's own view (/proc/self, /proc/thread-self, /proc/PID, /dev/fd, /dev/stdin, ...)."""
    path = _absolute(value, cwd)
    touched = _physical_components(path)
    for textual in _physical_components(os.path.normpath(path)):
        if textual not in touched:
            touched.append(textual)
    return touched


def _absolute(value: str, cwd: str | None) -> str:
    if "\x00" in value:
        raise PathRefused("it contains a NUL byte")
    if value.startswith("file:"):
        value = _file_uri_path(value)
    path = os.path.expanduser(value) if value.startswith("~") else value
    if not path.startswith("/"):
        if cwd is None:
            raise PathRefused(
                "it is a relative path and llmc does not know the server's working directory "
                "(remote, or run by a session keeper without a `cwd`): give an absolute path"
            )
        path = os.path.join(cwd, path)  # "" is the working directory itself, as servers read it
    return path


def _file_uri_path(uri: str) -> str:

    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise PathRefused("it is a file: URI with a host, query or fragment (only file:///absolute/path is judged)")
    path = unquote(parts.path)
    if "\x00" in path:
        raise PathRefused("it contains a NUL byte")
    return path


def _physical_components(path: str) -> list[str]:
    todo = path.split("/")[::-1]  # components still to walk, the next one last
    done: list[str] = []  # the physical path walked so far, one component each
    missing = 0  # how many trailing components of `done` do not exist (none of them can be a link)
    links = 0
    touched: list[str] = []
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if done:
                done.pop()
                missing = max(0, missing - 1)
            continue
        if missing:
            done.append(name)
            missing += 1
            continue
        here = "/" + "/".join([*done, name])
        _refuse_process_view(done, name, here)
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            done.append(name)
            missing = 1
            continue
        except OSError as exc:
            raise PathRefused(f"{here} cannot be examined ({exc.strerror})") from None
        if not stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise PathRefused(f"too many levels of symbolic links at {here} (a loop?)")
        if all(rest in ("", ".") for rest in todo):
            touched.append(here)  # the last component: the link itself may be what is acted on
        try:
            target = os.readlink(here)
        except OSError as exc:
            raise PathRefused(f"{here} cannot be examined ({exc.strerror})") from None
        if target.startswith("/"):
            done = []
        todo.extend(target.split("/")[::-1])
    touched.append("/" + "/".join(done))
    return touched


# Names that read differently in each process: /proc/self (and thread-self, and /proc/PID for any
# pid: its cwd, root, fd/N, task/TID/...) and /dev/fd, /dev/stdin... (links into /proc/self/fd).
# llmc resolving them would see its own process; the server resolves them in its own.
_PROCESS_VIEWS: dict[tuple[str, ...], Callable[[str], bool]] = {
    ("proc",): lambda name: name in ("self", "thread-self") or name.isdigit(),
    ("dev",): lambda name: name in ("fd", "stdin", "stdout", "stderr"),
}


def _refuse_process_view(done: list[str], name: str, here: str) -> None:
    """PathRefused for a physical path that enters a process's own view (reached as written or
    through any symlink that leads there)."""
    judge = _PROCESS_VIEWS.get(tuple(done))
    if judge is not None and judge(name):
        raise PathRefused(
            f"it reaches {here}, which names a process (its working directory, root, open files): "
            "the server would resolve it in its own process, not llmc's, so no path rule can "
            "judge it; give the path itself"
        )


def glob_patterns(glob: str, cwd: str | None) -> list[tuple[str, str]]:
    """A rule's path glob as (literal head, wildcard tail) pairs, the head resolved like the paths
    it is matched against (a relative head at `cwd`, else at llmc's working directory). A head
    whose last component is a symlink gives two pairs: its target, and the link itself. A head
    that cannot be resolved matches nothing."""
    cut = min((glob.find(c) for c in "*?[" if c in glob), default=len(glob))
    if cut == 0:
        return [("", glob)]  # starts with a wildcard: matched as written
    slash = glob.rfind("/", 0, cut) if cut < len(glob) else len(glob)
    head, tail = (glob[:slash], glob[slash:]) if slash >= 0 else (".", "/" + glob)
    try:
        heads = _physical_components(_absolute(head or "/", cwd or os.getcwd()))  # the kernel's reading only: never widen a rule
    except PathRefused:
        return []
    return [(h if not tail else h.rstrip("/"), tail) for h in heads]


@lru_cache(maxsize=256)
def path_regex(head: str, tail: str) -> re.Pattern[str]:
    out, i = [re.escape(head)], 0
    while i < len(tail):
        if tail.startswith("/**", i) and (i + 3 == len(tail)):
            out.append(r"(?:/.*)?")
            i += 3
        elif tail.startswith("**", i):
            out.append(".*")
            i += 2
        elif tail[i] == "*":
            out.append("[^/]*")
            i += 1
        elif tail[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(tail[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


# -- lint: path-like arguments no rule covers ------------------------------------------------------


def judge_argument(arg: str, value: object, globs: list[str], cwd: str | None) -> str | None:
    """Why the value of a ruled argument is refused, or None. Every string inside it (lists and
    objects at any depth) must be a path under one of the globs; any other leaf (number, bool,
    null) is refused: a server could read it as a path or fall back to a default we cannot see."""
    patterns = [p for g in globs for p in glob_patterns(g, cwd)]
    try:
        leaves = list(_leaves(arg, value))
    except PathRefused as exc:
        return f"argument {arg} {exc}"
    for where, leaf in leaves:
        if not isinstance(leaf, str):
            return f"argument {where} is {json.dumps(leaf)}: under a path rule every value must be a string path"
        try:
            touched = touched_paths(leaf, cwd)
        except PathRefused as exc:
            return f"argument {where}={leaf!r} is refused: {exc}"
        for real in touched:
            if not any(path_regex(head, tail).match(real) for head, tail in patterns):
                return f"argument {where}={leaf!r} (resolved {real}) matches none of {globs}"
    return None


def _leaves(where: str, value: object, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if isinstance(value, (list, dict)) and depth >= MAX_NESTING:
        raise PathRefused(f"nests deeper than {MAX_NESTING} levels")  # no recursion a model can exhaust
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(f"{where}[{i}]", item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(f"{where}.{key}", item, depth + 1)
    else:
        yield where, value

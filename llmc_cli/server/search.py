"""Background searches by file name (glob) or content (plain text or regex), read page by page.

A search walks the tree in its own thread, through descriptors (jail.Jail.walk), so a large
tree never blocks the server; it stops at its result limit, its time limit or stop_search.
"""

from __future__ import annotations

import fnmatch
import os
import re
import secrets
import stat
import threading
import time
from typing import Any

from llmc_cli.server.jail import Jail, fd_path
from llmc_cli.server.protocol import ToolError

MAX_SEARCHES = 32  # remembered at once; the oldest finished ones are forgotten first
MAX_RUNNING = 4
MAX_LINE_CHARS = 500  # of one matching line in a result
SNIFF_BYTES = 8192


class Search:
    def __init__(self, search_id: str, jail: Jail, root: str, shown: str, pattern: str, kind: str, *,
                 regex: bool, case_sensitive: bool, file_pattern: str | None, max_results: int,
                 max_file_bytes: int, timeout: float, max_depth: int) -> None:
        self.id, self.root, self.pattern, self.kind = search_id, root, pattern, kind
        self.results: list[dict[str, Any]] = []
        self.done = False
        self.stopped_by: str | None = None  # limit | timeout | stopped | error text
        self.started = time.monotonic()
        self.ended: float | None = None
        self.files_scanned = 0
        self._stop = threading.Event()
        self._cond = threading.Condition()
        flags = 0 if case_sensitive else re.IGNORECASE
        try:
            self._match = re.compile(pattern if regex else re.escape(pattern), flags).search if kind == "content" else None
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        self._glob = pattern if case_sensitive else pattern.lower()
        self._max_results = max_results
        self._args = (jail, shown, file_pattern, max_results, max_file_bytes, timeout, max_depth, case_sensitive)
        threading.Thread(target=self._run, daemon=True, name=f"llmc-{search_id}").start()

    def _run(self) -> None:
        jail, shown, file_pattern, max_results, max_file_bytes, timeout, max_depth, case_sensitive = self._args
        deadline = self.started + timeout
        try:
            for rel, st in jail.walk(self.root, shown, max_depth):
                if self._stop.is_set():
                    self.stopped_by = self.stopped_by or "stopped"
                    break
                if time.monotonic() > deadline:
                    self.stopped_by = f"time limit of {timeout:g} s"
                    break
                found = self._name_hit(rel, st, case_sensitive) if self.kind == "files" else \
                    self._content_hits(rel, st, file_pattern, max_file_bytes)
                with self._cond:
                    for hit in found:
                        if len(self.results) >= max_results:
                            self.stopped_by = f"result limit of {max_results}"
                            break
                        self.results.append(hit)
                    self._cond.notify_all()
                if self.stopped_by:
                    break
        except ToolError as exc:
            self.stopped_by = str(exc)
        finally:
            with self._cond:
                self.done = True
                self.ended = time.monotonic()
                self._cond.notify_all()

    def _name_hit(self, rel: str, st: os.stat_result, case_sensitive: bool) -> list[dict[str, Any]]:
        name = rel if "/" in self.pattern else rel.rsplit("/", 1)[-1]
        if not fnmatch.fnmatchcase(name if case_sensitive else name.lower(), self._glob):
            return []
        kind = "directory" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else \
            "symlink" if stat.S_ISLNK(st.st_mode) else "other"
        return [{"path": os.path.join(self.root, rel), "type": kind, "size": st.st_size,
                 "modified": iso_time(st.st_mtime)}]

    def _content_hits(self, rel: str, st: os.stat_result, file_pattern: str | None,
                      max_file_bytes: int) -> list[dict[str, Any]]:
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_size > max_file_bytes:
            return []
        if file_pattern and not fnmatch.fnmatch(rel.rsplit("/", 1)[-1], file_pattern):
            return []
        path = os.path.join(self.root, rel)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return []
        hits: list[dict[str, Any]] = []
        assert self._match is not None
        with os.fdopen(fd, "rb") as f:
            real = fd_path(fd) or path  # where it really is, should a directory have been swapped
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or not self._in_root(real) \
                    or (st.st_dev, st.st_ino) in self._args[0].protected.ids:
                return []
            if b"\0" in f.read(SNIFF_BYTES):
                return []  # binary
            f.seek(0)
            self.files_scanned += 1
            for number, raw in enumerate(f, 1):
                if self._stop.is_set() or len(hits) >= self._max_results:
                    break
                line = raw[:10 * MAX_LINE_CHARS].decode("utf-8", "replace").rstrip("\r\n")
                if self._match(line):
                    hits.append({"path": path, "line": number, "text": line[:MAX_LINE_CHARS]})
        return hits

    def _in_root(self, real: str) -> bool:
        jail = self._args[0]
        return (real == self.root or real.startswith(self.root.rstrip("/") + "/")) and jail.inside(real)

    def stop(self) -> None:
        if not self.done:
            self.stopped_by = self.stopped_by or "stopped"
        self._stop.set()

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self.done and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(timeout=min(left, 0.2))

    def page(self, offset: int, limit: int) -> dict[str, Any]:
        with self._cond:
            results = self.results[offset:offset + limit]
            total = len(self.results)
        out = {**self.status(), "offset": offset, "results": results, "totalResults": total}
        if offset + len(results) < total or not self.done:
            out["nextOffset"] = offset + len(results)
        return out

    def status(self) -> dict[str, Any]:
        end = self.ended if self.ended is not None else time.monotonic()
        out: dict[str, Any] = {"searchId": self.id, "kind": self.kind, "pattern": self.pattern, "path": self.root,
                               "done": self.done, "resultCount": len(self.results),
                               "elapsedMs": round((end - self.started) * 1000)}
        if self.stopped_by:
            out["stoppedBy"] = self.stopped_by
        return out


class Searches:
    def __init__(self) -> None:
        self.searches: dict[str, Search] = {}
        self.lock = threading.Lock()

    def start(self, **kwargs: Any) -> Search:
        with self.lock:
            running = [s for s in self.searches.values() if not s.done]
            if len(running) >= MAX_RUNNING:
                raise ToolError(f"refused: {len(running)} searches are running (limit {MAX_RUNNING}); stop one first")
            finished = [k for k, s in self.searches.items() if s.done]
            for key in finished[:max(0, len(self.searches) + 1 - MAX_SEARCHES)]:
                del self.searches[key]
            search = Search(f"search-{secrets.token_hex(4)}", **kwargs)
            self.searches[search.id] = search
        return search

    def get(self, search_id: Any) -> Search:
        with self.lock:
            search = self.searches.get(search_id) if isinstance(search_id, str) else None
        if search is None:
            raise ToolError(f"no search with id {search_id!r} (list_searches shows them; old ones are forgotten)")
        return search

    def list(self) -> list[Search]:
        with self.lock:
            return list(self.searches.values())

    def close(self) -> None:
        for search in self.list():
            search.stop()


def iso_time(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))

"""Background searches by file name (glob) or content (plain text or regex), read page by page.

A search walks the tree in its own thread, through descriptors (jail.Jail.walk), so a large
tree never blocks the server; it stops at its result limit, its time limit or stop_search.

A regular expression is matched in a separate process (RegexWorker): Python's `re` holds the
GIL for the whole of one match, so a catastrophic pattern (`(.+)+\x00` on a long line) run in a
thread would freeze every thread of the server (and of llmc, where the server runs in-process),
timers included. A process can be killed; the search then ends with a clear reason.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
import time
from typing import TYPE_CHECKING, Any

from llmc_cli import server
from llmc_cli.mcp.tool_error import ToolError
from llmc_cli.model import JSONObject
from llmc_cli.server.jail import Jail, fd_path
from llmc_cli.server.workspace_results import SearchPage, SearchStatus

if TYPE_CHECKING:
    from llmc_cli.server.regex_worker import RegexWorker

MAX_SEARCHES = 32  # remembered at once; the oldest finished ones are forgotten first
MAX_RUNNING = 4
MAX_LINE_CHARS = 500  # of one matching line in a result
SNIFF_BYTES = 8192
BATCH_BYTES = 1_000_000  # of lines sent to the regex worker at once


class MatchTimeout(Exception):
    pass


class Search:
    def __init__(
        self,
        search_id: str,
        jail: Jail,
        root: str,
        shown: str,
        pattern: str,
        kind: str,
        *,
        regex: bool,
        case_sensitive: bool,
        file_pattern: str | None,
        max_results: int,
        max_file_bytes: int,
        timeout: float,
        max_depth: int,
    ) -> None:
        self.id, self.root, self.pattern, self.kind = search_id, root, pattern, kind
        self.results: list[JSONObject] = []
        self.done = False
        self.stopped_by: str | None = None  # limit | timeout | stopped | error text
        self.started = time.monotonic()
        self.ended: float | None = None
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._flags = 0 if case_sensitive else re.IGNORECASE
        self._regex = regex and kind == "content"
        self._worker: RegexWorker | None = None  # server/regex_worker.py, loaded with the first
        self._deadline = self.started + timeout
        try:
            # Checked here for a clear error (parsing is linear in the pattern); a regular
            # expression is matched in the worker, plain text here (an escaped literal cannot
            # backtrack).
            compiled = re.compile(pattern if regex else re.escape(pattern), self._flags) if kind == "content" else None
        except (re.error, RecursionError, OverflowError) as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        self._match = None if self._regex or compiled is None else compiled.search
        self._glob = pattern if case_sensitive else pattern.lower()
        self._max_results = max_results
        self._args = (jail, shown, file_pattern, max_results, max_file_bytes, timeout, max_depth, case_sensitive)
        threading.Thread(target=self._run, daemon=True, name=f"llmc-{search_id}").start()

    def _run(self) -> None:
        jail, shown, file_pattern, max_results, max_file_bytes, timeout, max_depth, case_sensitive = self._args
        deadline = self._deadline
        try:
            if self._regex:  # started by this thread: it dies with it (PDEATHSIG)
                self._worker = server.RegexWorker(self.pattern, self._flags, timeout)
            for rel, st in jail.walk(self.root, shown, max_depth):
                if self._stop.is_set():
                    self.stopped_by = self.stopped_by or "stopped"
                    break
                if time.monotonic() > deadline:
                    self.stopped_by = f"time limit of {timeout:g} s"
                    break
                found = (
                    self._name_hit(rel, st, case_sensitive)
                    if self.kind == "files"
                    else self._content_hits(rel, st, file_pattern, max_file_bytes)
                )
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
        except MatchTimeout:
            self.stopped_by = (
                f"time limit of {timeout:g} s: the regular expression was still matching "
                f"(catastrophic backtracking?); its matcher process was killed"
            )
        except OSError as exc:
            self.stopped_by = f"the search failed: {exc.strerror or exc}"
        finally:
            if self._worker is not None:
                self._worker.kill()
            with self._cond:
                self.done = True
                self.ended = time.monotonic()
                self._cond.notify_all()

    def _name_hit(self, rel: str, st: os.stat_result, case_sensitive: bool) -> list[JSONObject]:
        name = rel if "/" in self.pattern else rel.rsplit("/", 1)[-1]
        if not fnmatch.fnmatchcase(name if case_sensitive else name.lower(), self._glob):
            return []
        kind = (
            "directory"
            if stat.S_ISDIR(st.st_mode)
            else "file"
            if stat.S_ISREG(st.st_mode)
            else "symlink"
            if stat.S_ISLNK(st.st_mode)
            else "other"
        )
        return [{"path": os.path.join(self.root, rel), "type": kind, "size": st.st_size, "modified": iso_time(st.st_mtime)}]

    def _content_hits(self, rel: str, st: os.stat_result, file_pattern: str | None, max_file_bytes: int) -> list[JSONObject]:
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_size > max_file_bytes:
            return []
        if file_pattern and not fnmatch.fnmatch(rel.rsplit("/", 1)[-1], file_pattern):
            return []
        path = os.path.join(self.root, rel)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return []
        hits: list[JSONObject] = []
        with os.fdopen(fd, "rb") as f:
            real = fd_path(fd) or path  # where it really is, should a directory have been swapped
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_nlink > 1
                or not self._in_root(real)
                or (st.st_dev, st.st_ino) in self._args[0].protected.ids
            ):
                return []
            if b"\0" in f.read(SNIFF_BYTES):
                return []  # binary
            f.seek(0)
            batch: list[str] = []
            size, first = 0, 1
            for number, raw in enumerate(f, 1):
                if self._stop.is_set() or len(hits) >= self._max_results:
                    break
                line = raw[: 10 * MAX_LINE_CHARS].decode("utf-8", "replace").rstrip("\r\n")
                if self._match is not None:
                    if self._match(line):
                        hits.append({"path": path, "line": number, "text": line[:MAX_LINE_CHARS]})
                    continue
                batch.append(line)
                size += len(line)
                if size >= BATCH_BYTES:
                    hits += self._worker_hits(path, first, batch)
                    batch, size, first = [], 0, number + 1
            if batch and len(hits) < self._max_results:
                hits += self._worker_hits(path, first, batch)
        return hits[: self._max_results]

    def _worker_hits(self, path: str, first: int, lines: list[str]) -> list[JSONObject]:
        assert self._worker is not None
        found = self._worker.matching(lines, self._deadline, self._stop)
        return [{"path": path, "line": first + i, "text": lines[i][:MAX_LINE_CHARS]} for i in found]

    def _in_root(self, real: str) -> bool:
        jail = self._args[0]
        return (real == self.root or real.startswith(self.root.rstrip("/") + "/")) and jail.inside(real)

    def stop(self) -> None:
        """Ask the search to stop: its thread kills the regex worker within 0.2 s."""
        if not self.done:
            self.stopped_by = self.stopped_by or "stopped"
        self._stop.set()

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self.done and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(timeout=min(left, 0.2))

    def page(self, offset: int, limit: int) -> SearchPage:
        with self._cond:
            results: list[JSONObject] = list(self.results[offset : offset + limit])
            total = len(self.results)
        out: SearchPage = {**self.status(), "offset": offset, "results": results, "totalResults": total}
        if offset + len(results) < total or not self.done:
            out["nextOffset"] = offset + len(results)
        return out

    def status(self) -> SearchStatus:
        end = self.ended if self.ended is not None else time.monotonic()
        out: SearchStatus = {
            "searchId": self.id,
            "kind": self.kind,
            "pattern": self.pattern,
            "path": self.root,
            "done": self.done,
            "resultCount": len(self.results),
            "elapsedMs": round((end - self.started) * 1000),
        }
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
            for key in finished[: max(0, len(self.searches) + 1 - MAX_SEARCHES)]:
                del self.searches[key]
            search = Search(f"search-{os.urandom(4).hex()}", **kwargs)
            self.searches[search.id] = search
        return search

    def get(self, search_id: object) -> Search:
        with self.lock:
            search = self.searches.get(search_id) if isinstance(search_id, str) else None
        if search is None:
            raise ToolError(f"no search with id {search_id!r} (list_searches shows them; old ones are forgotten)")
        return search

    def list(self) -> list[Search]:
        with self.lock:
            return list(self.searches.values())

    def close(self) -> None:
        """Stop every search and give each a moment to kill its regex worker (which would die
        with the process anyway: PDEATHSIG)."""
        searches = self.list()
        for search in searches:
            search.stop()
        for search in searches:
            search.wait(1.0)


def iso_time(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))

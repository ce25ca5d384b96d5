"""The built-in workspace server: files, search and processes under the workspace roots.

Desktop Commander's abilities without its weak points: nothing outside the roots (jail.py),
no command that is not allow-listed and no shell unless configured (processes.py), and no tool
that changes the configuration. `read_only` hides every writing tool and every process tool.

    make_workspace_server(roots, read_only, **options) -> endpoint with handle(message, send)
"""

from __future__ import annotations

import codecs
import os
import stat
import time
from collections import deque
from typing import Any

from llmc_cli import __version__
from llmc_cli.errors import ConfigError
from llmc_cli.server import jail as P
from llmc_cli.server.processes import FIXED_PATH, Launcher, ProcessConfig, ProcessTable
from llmc_cli.server.protocol import McpServer, ToolDef, ToolError
from llmc_cli.server.search import Searches, iso_time

# option -> (accepted types, default). Unknown options are errors: a typo must never loosen
# (or silently fail to tighten) the sandbox.
OPTIONS: dict[str, tuple[tuple[type, ...], Any]] = {
    "allow_commands": ((list,), []),
    "allow_shell": ((bool,), False),
    "allow_network": ((bool,), False),
    "sandbox": ((str,), "auto"),
    "timeout": ((int, float), 300),  # seconds a process may live
    "max_processes": ((int,), 4),
    "max_user_processes": ((int,), 1024),  # RLIMIT_NPROC of each process (the user's processes in all)
    "max_memory_bytes": ((int,), 4 << 30),  # RLIMIT_AS of each process
    "max_cpu_seconds": ((int, type(None)), None),  # RLIMIT_CPU of each process; None: `timeout`
    "max_output_bytes": ((int,), 1_000_000),  # output kept per process; reaching it ends the process
    "max_read_bytes": ((int,), 256_000),  # text returned by one read
    "max_file_bytes": ((int,), 50_000_000),  # largest file read_file or a content search will scan
    "max_write_bytes": ((int,), 1_000_000),  # largest write or edited file
    "max_results": ((int,), 1000),  # search results and directory entries
    "search_timeout": ((int, float), 60),
    "env": ((dict,), {}),  # extra environment for processes (the rest is scrubbed)
    "page_size": ((int,), 100),  # tools per tools/list page
    "protect": ((list,), []),  # more paths off limits; llmc adds its own files (never fewer)
}
SNIFF_BYTES = 8192
PAGE_BYTES = 20_000  # default output page of a process

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def _hints(destructive: bool, idempotent: bool, open_world: bool = False) -> dict[str, bool]:
    return {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent,
            "openWorldHint": open_world}


def make_workspace_server(roots: list[str] | None = None, read_only: bool = True, **options: Any) -> McpServer:
    """The endpoint (handle(message, send), close()) for the in-memory transport or run_stdio."""
    workspace = Workspace(roots if roots is not None else ["."], read_only, options)
    return McpServer("llmc-workspace", __version__, workspace.tools(), instructions=workspace.instructions(),
                     page_size=workspace.options["page_size"], on_close=workspace.close)


def _obj(props: dict[str, Any], required: list[str] | None = None, *, closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
NINT = {"type": ["integer", "null"]}
PATH = {"type": "string", "description": "Path inside a workspace root; relative paths start at the first root."}
ENTRY = _obj({"name": STR, "type": {"type": "string", "enum": ["file", "directory", "symlink", "other"]},
              "size": INT, "modified": STR}, ["name", "type", "size", "modified"], closed=False)
READ_OUT = _obj({"path": STR, "content": STR, "offset": INT, "lines": INT, "totalLines": INT, "size": INT,
                 "truncated": BOOL, "nextOffset": INT},
                ["path", "content", "offset", "lines", "totalLines", "size", "truncated"], closed=False)
PROC_STATUS = {"handle": STR, "argv": {"type": "array", "items": STR}, "pid": INT, "running": BOOL,
               "exitCode": NINT, "outputBytes": INT, "startedAt": STR, "endedBy": STR}
PROC_OUT = _obj({**PROC_STATUS, "offset": INT, "output": STR, "nextOffset": INT, "skippedBytes": INT},
                ["handle", "running", "exitCode", "offset", "output", "nextOffset"], closed=False)
SEARCH_STATUS = {"searchId": STR, "kind": STR, "pattern": STR, "path": STR, "done": BOOL, "resultCount": INT,
                 "elapsedMs": INT, "stoppedBy": STR}
SEARCH_PAGE = _obj({**SEARCH_STATUS, "offset": INT, "totalResults": INT, "nextOffset": INT,
                    "results": {"type": "array", "items": {"type": "object"}}},
                   ["searchId", "done", "offset", "results", "totalResults"], closed=False)


class Workspace:
    def __init__(self, roots: list[str], read_only: bool, options: dict[str, Any]) -> None:
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            raise ConfigError("workspace: roots must be a list of directory paths")
        if not isinstance(read_only, bool):
            raise ConfigError("workspace: read_only must be true or false")
        self.options = _check_options(options)
        self.jail = P.Jail(roots, protect=protected_paths(self.options["protect"]))
        self.read_only = read_only
        self.searches = Searches()
        self.launcher = Launcher(ProcessConfig(
            roots=self.jail.roots, hidden=self.jail.protected.names,
            hidden_dirs=self.jail.protected.dirs, allow_commands=self.options["allow_commands"],
            allow_shell=self.options["allow_shell"], allow_network=self.options["allow_network"],
            sandbox=self.options["sandbox"], timeout=float(self.options["timeout"]),
            max_output_bytes=self.options["max_output_bytes"], max_processes=self.options["max_processes"],
            max_user_processes=self.options["max_user_processes"], max_memory_bytes=self.options["max_memory_bytes"],
            max_cpu_seconds=self.options["max_cpu_seconds"],
            env=self.options["env"]))
        self.processes = ProcessTable(self.launcher)
        enabled, self.process_note = self.launcher.enabled()
        if read_only:
            enabled, self.process_note = False, "read-only mode: no process runs"
        self.processes_enabled = enabled

    def close(self) -> None:
        self.searches.close()
        self.processes.close()

    def instructions(self) -> str:
        roots = ", ".join(self.jail.roots)
        mode = "read-only" if self.read_only else "read-write"
        return (f"Files under the workspace roots ({roots}), {mode}. Relative paths start at {self.jail.roots[0]}. "
                f"Paths outside the roots are refused. Processes: {self.process_note}.")

    # ------------------------------------------------------------------ registry
    def tools(self) -> list[ToolDef]:
        limit = self.options["max_results"]
        tools = [
            ToolDef("read_file", "Read a UTF-8 text file by lines: `offset` is the first line (0-based; negative "
                    "counts from the end, e.g. -20 = the last 20 lines), `length` the number of lines. Returns the "
                    "total line count. Binary files are refused.",
                    _obj({"path": PATH, "offset": {**INT, "default": 0},
                          "length": {**INT, "minimum": 1, "maximum": 100_000, "default": 1000}}, ["path"]),
                    self.read_file, READ_OUT, READ_ONLY),
            ToolDef("read_multiple_files", "Read several text files at once (first `length` lines of each); a file "
                    "that cannot be read gets an error entry instead of failing the call.",
                    _obj({"paths": {"type": "array", "items": STR, "minItems": 1, "maxItems": 50},
                          "length": {**INT, "minimum": 1, "maximum": 100_000, "default": 1000}}, ["paths"]),
                    self.read_multiple_files,
                    _obj({"files": {"type": "array", "items": {"type": "object"}}}, ["files"]), READ_ONLY),
            ToolDef("list_directory", f"List a directory, `depth` levels deep (1 = its entries only), at most "
                    f"{limit} entries, with type, size and modification time (UTC). Symbolic links are listed, "
                    "not followed.",
                    _obj({"path": {**PATH, "default": "."},
                          "depth": {**INT, "minimum": 1, "maximum": 10, "default": 1}}),
                    self.list_directory,
                    _obj({"path": STR, "entries": {"type": "array", "items": ENTRY}, "truncated": BOOL},
                         ["path", "entries", "truncated"]), READ_ONLY),
            ToolDef("get_file_info", "Type, size, times (UTC), permissions and link count of a file or directory.",
                    _obj({"path": PATH}, ["path"]), self.get_file_info,
                    _obj({"path": STR, "type": STR, "size": INT, "modified": STR, "accessed": STR, "changed": STR,
                          "permissions": STR, "links": INT},
                         ["path", "type", "size", "modified", "permissions", "links"], closed=False), READ_ONLY),
            ToolDef("start_search", "Start a background search under `path`: kind 'files' matches file names "
                    "against a glob `pattern` (e.g. '*.log'; a pattern with '/' matches the relative path), kind "
                    "'content' finds lines containing `pattern` (plain text, or a regular expression with "
                    "regex=true) in text files, optionally only files matching `file_pattern`. Returns the first "
                    f"results and a searchId for get_more_search_results. At most {limit} results.",
                    _obj({"pattern": {**STR, "minLength": 1}, "path": {**PATH, "default": "."},
                          "kind": {"type": "string", "enum": ["files", "content"], "default": "files"},
                          "regex": {**BOOL, "default": False}, "case_sensitive": {**BOOL, "default": False},
                          "file_pattern": STR,
                          "max_results": {**INT, "minimum": 1, "maximum": limit, "default": limit},
                          "max_depth": {**INT, "minimum": 1, "maximum": 100, "default": 30},
                          "wait_ms": {**INT, "minimum": 0, "maximum": 30_000, "default": 500}}, ["pattern"]),
                    self.start_search, SEARCH_PAGE, READ_ONLY),
            ToolDef("get_more_search_results", "Results of a search from `offset` on (a page of at most `limit`).",
                    _obj({"search_id": STR, "offset": {**INT, "minimum": 0, "default": 0},
                          "limit": {**INT, "minimum": 1, "maximum": 1000, "default": 100}}, ["search_id"]),
                    self.get_more_search_results, SEARCH_PAGE, READ_ONLY),
            ToolDef("stop_search", "Stop a running search; its results so far stay readable.",
                    _obj({"search_id": STR}, ["search_id"]), self.stop_search,
                    _obj(SEARCH_STATUS, ["searchId", "done"], closed=False), READ_ONLY),
            ToolDef("list_searches", "The searches of this session, running and finished.", _obj({}),
                    self.list_searches,
                    _obj({"searches": {"type": "array", "items": _obj(SEARCH_STATUS, closed=False)}}, ["searches"]),
                    READ_ONLY),
            ToolDef("get_config", "The effective configuration of this server (roots, modes, allowed commands, "
                    "sandbox, limits). Read-only: no tool can change it.", _obj({}), self.get_config,
                    _obj({"roots": {"type": "array", "items": STR}, "readOnly": BOOL}, ["roots", "readOnly"],
                         closed=False), READ_ONLY),
        ]
        if not self.read_only:
            tools += [
                ToolDef("write_file", "Write a UTF-8 text file: mode 'rewrite' replaces it (atomically: never "
                        "half-written), 'append' adds to its end. Creates the file, not its directory. At most "
                        f"{self.options['max_write_bytes']} bytes per call.",
                        _obj({"path": PATH, "content": STR,
                              "mode": {"type": "string", "enum": ["rewrite", "append"], "default": "rewrite"}},
                             ["path", "content"]), self.write_file,
                        _obj({"path": STR, "mode": STR, "bytesWritten": INT, "created": BOOL},
                             ["path", "mode", "bytesWritten", "created"]), _hints(destructive=True, idempotent=False)),
                ToolDef("edit_block", "Replace exact text in a file: `old_text` must occur exactly "
                        "`expected_replacements` times (default 1), otherwise nothing is written.",
                        _obj({"path": PATH, "old_text": {**STR, "minLength": 1}, "new_text": STR,
                              "expected_replacements": {**INT, "minimum": 1, "default": 1}},
                             ["path", "old_text", "new_text"]), self.edit_block,
                        _obj({"path": STR, "replacements": INT}, ["path", "replacements"]),
                        _hints(destructive=True, idempotent=False)),
                ToolDef("create_directory", "Create a directory and any missing parents (fine if it exists).",
                        _obj({"path": PATH}, ["path"]), self.create_directory,
                        _obj({"path": STR, "created": BOOL}, ["path", "created"]),
                        _hints(destructive=False, idempotent=True)),
                ToolDef("move_file", "Move or rename a file or directory inside the roots. Refuses to overwrite "
                        "an existing destination.",
                        _obj({"source": PATH, "destination": PATH}, ["source", "destination"]), self.move_file,
                        _obj({"source": STR, "destination": STR}, ["source", "destination"]),
                        _hints(destructive=True, idempotent=False)),
            ]
        if self.processes_enabled:
            tools += self._process_tools()
        return tools

    def _process_tools(self) -> list[ToolDef]:
        allowed = ", ".join(sorted(set(self.launcher.allowed.values()))) or "none"
        run = {"argv": {"type": "array", "items": STR, "minItems": 1,
                        "description": f"Program and arguments, no shell. Allowed programs: {allowed}."},
               "cwd": {**PATH, "default": "."}}
        if self.options["allow_shell"]:
            run["command"] = {**STR, "description": "A shell command line run by /bin/sh -c (instead of argv)."}
        limit = float(self.options["timeout"])
        return [
            ToolDef("start_process", "Start a process (argv, no shell) in its own sandbox and return its handle "
                    "with the first output, once it is quiet (e.g. waiting for input) or `wait_ms` passed. "
                    f"It is ended after `timeout_s` (at most {limit:g} s) or "
                    f"{self.options['max_output_bytes']} bytes of output.",
                    _obj({**run, "timeout_s": {"type": "number", "minimum": 0.1, "maximum": limit},
                          "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 3000},
                          "quiet_ms": {**INT, "minimum": 10, "maximum": 10_000, "default": 500}}),
                    self.start_process, PROC_OUT, _hints(destructive=True, idempotent=False, open_world=True)),
            ToolDef("read_process_output", "Output of a process (stdout and stderr merged) from byte `offset` on; "
                    "optionally wait up to `wait_ms` for more.",
                    _obj({"handle": STR, "offset": {**INT, "minimum": 0, "default": 0},
                          "length": {**INT, "minimum": 1, "maximum": 200_000, "default": PAGE_BYTES},
                          "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 0}}, ["handle"]),
                    self.read_process_output, PROC_OUT, READ_ONLY),
            ToolDef("interact_with_process", "Send a line of input to a process and return what it prints in "
                    "reply (once quiet or after `wait_ms`).",
                    _obj({"handle": STR, "input": STR, "newline": {**BOOL, "default": True},
                          "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 3000},
                          "quiet_ms": {**INT, "minimum": 10, "maximum": 10_000, "default": 300}},
                         ["handle", "input"]),
                    self.interact_with_process, PROC_OUT, _hints(destructive=True, idempotent=False, open_world=True)),
            ToolDef("terminate_process", "End a process and everything it started (SIGTERM, then SIGKILL).",
                    _obj({"handle": STR}, ["handle"]), self.terminate_process,
                    _obj(PROC_STATUS, ["handle", "running", "exitCode"], closed=False),
                    _hints(destructive=True, idempotent=True)),
            ToolDef("list_processes", "The processes started in this session, running and finished.", _obj({}),
                    self.list_processes,
                    _obj({"processes": {"type": "array", "items": _obj(PROC_STATUS, closed=False)}}, ["processes"]),
                    READ_ONLY),
            ToolDef("run_command", "Run a command to completion (argv, no shell) with a time limit; returns its "
                    "exit code and output (stdout and stderr merged). `input` is sent to its standard input.",
                    _obj({**run, "input": STR,
                          "timeout_s": {"type": "number", "minimum": 0.1, "maximum": limit, "default": min(30, limit)}}),
                    self.run_command,
                    _obj({**PROC_STATUS, "output": STR, "timedOut": BOOL, "truncated": BOOL},
                         ["handle", "exitCode", "output", "timedOut", "truncated"], closed=False),
                    _hints(destructive=True, idempotent=False, open_world=True)),
        ]

    # ------------------------------------------------------------------ files
    def read_file(self, args: dict[str, Any], budget: int | None = None) -> dict[str, Any]:
        shown = args["path"]
        real = self.jail.resolve(shown)
        offset, length = args.get("offset", 0), args.get("length", 1000)
        budget = self.options["max_read_bytes"] if budget is None else budget
        fd = self.jail.open_read(real, shown)
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(fd).st_size
            if size > self.options["max_file_bytes"]:
                raise ToolError(f"{shown}: refused: {size} bytes, larger than the limit of "
                                f"{self.options['max_file_bytes']} bytes")
            head = f.read(SNIFF_BYTES)
            if b"\0" in head or not _utf8_prefix(head):
                raise ToolError(f"{shown}: refused: a binary file (not UTF-8 text); read_file returns text only")
            f.seek(0)
            picked: deque[bytes] = deque(maxlen=-offset if offset < 0 else None)
            total, used, truncated = 0, 0, False
            for line in f:
                if offset < 0:
                    picked.append(line)
                elif offset <= total < offset + length and not truncated:
                    if used + len(line) > budget:
                        truncated = True
                    else:
                        picked.append(line)
                        used += len(line)
                total += 1
        first = max(total + offset, 0) if offset < 0 else offset
        if offset < 0:  # the tail: keep its last lines within the budget
            picked = deque(list(picked)[-length:])
            while picked and sum(map(len, picked)) > budget:
                picked.popleft()
                first += 1
                truncated = True
        out = {"path": self.jail.relative(real), "content": b"".join(picked).decode("utf-8", "replace"),
               "offset": first, "lines": len(picked), "totalLines": total, "size": size, "truncated": truncated}
        if offset >= 0 and first + len(picked) < total:
            out["nextOffset"] = first + len(picked)
        return out

    def read_multiple_files(self, args: dict[str, Any]) -> dict[str, Any]:
        budget = self.options["max_read_bytes"]
        files = []
        for path in args["paths"]:
            try:
                result = self.read_file({"path": path, "length": args.get("length", 1000)}, budget=budget)
                budget = max(budget - len(result["content"].encode()), 0)
                files.append(result)
            except ToolError as exc:
                files.append({"path": path, "error": str(exc)})
        return {"files": files}

    def list_directory(self, args: dict[str, Any]) -> dict[str, Any]:
        shown = args.get("path", ".")
        real = self.jail.resolve(shown)
        entries: list[dict[str, Any]] = []
        truncated = False
        for rel, st in self.jail.walk(real, shown, args.get("depth", 1)):
            if len(entries) >= self.options["max_results"]:
                truncated = True
                break
            entries.append({"name": rel, "type": _kind(st), "size": st.st_size, "modified": iso_time(st.st_mtime)})
        return {"path": self.jail.relative(real), "entries": entries, "truncated": truncated}

    def get_file_info(self, args: dict[str, Any]) -> dict[str, Any]:
        shown = args["path"]
        real = self.jail.resolve(shown)
        try:
            st = os.stat(real, follow_symlinks=False)
        except OSError as exc:
            raise P.os_error(shown, exc) from None
        return {"path": self.jail.relative(real), "type": _kind(st), "size": st.st_size,
                "modified": iso_time(st.st_mtime), "accessed": iso_time(st.st_atime),
                "changed": iso_time(st.st_ctime), "permissions": oct(stat.S_IMODE(st.st_mode))[2:],
                "links": st.st_nlink}

    def write_file(self, args: dict[str, Any]) -> dict[str, Any]:
        shown, mode = args["path"], args.get("mode", "rewrite")
        data = args["content"].encode("utf-8")
        if len(data) > self.options["max_write_bytes"]:
            raise ToolError(f"{shown}: refused: {len(data)} bytes, more than the limit of "
                            f"{self.options['max_write_bytes']} bytes per write")
        real = self.jail.resolve(shown)
        write = self.jail.append if mode == "append" else self.jail.write_atomic
        created = write(real, shown, data)
        return {"path": self.jail.relative(real), "mode": mode, "bytesWritten": len(data), "created": created}

    def edit_block(self, args: dict[str, Any]) -> dict[str, Any]:
        shown, old, new = args["path"], args["old_text"], args["new_text"]
        expected = args.get("expected_replacements", 1)
        real = self.jail.resolve(shown)
        fd = self.jail.open_read(real, shown)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(self.options["max_write_bytes"] + 1)
        if len(raw) > self.options["max_write_bytes"]:
            raise ToolError(f"{shown}: refused: larger than the edit limit of {self.options['max_write_bytes']} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{shown}: refused: a binary file (not UTF-8 text)") from None
        found = text.count(old)
        if found != expected:
            hint = " (check whitespace and line endings)" if found == 0 else ""
            raise ToolError(f"{shown}: old_text occurs {found} time(s), expected {expected}; nothing was written{hint}")
        self.jail.write_atomic(real, shown, text.replace(old, new).encode("utf-8"))
        return {"path": self.jail.relative(real), "replacements": found}

    def create_directory(self, args: dict[str, Any]) -> dict[str, Any]:
        shown = args["path"]
        real = self.jail.resolve(shown)
        missing, existing = [], real
        while not os.path.lexists(existing):
            existing, name = os.path.split(existing)
            missing.append(name)
        dfd = self.jail.open_dir(existing, shown)  # refuses a file, or a link swapped in
        try:
            for name in reversed(missing):
                os.mkdir(name, 0o777, dir_fd=dfd)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                os.close(dfd)
                dfd = sub
        except OSError as exc:
            raise P.os_error(shown, exc) from None
        finally:
            os.close(dfd)
        return {"path": self.jail.relative(real), "created": bool(missing)}

    def move_file(self, args: dict[str, Any]) -> dict[str, Any]:
        src_shown, dst_shown = args["source"], args["destination"]
        src, dst = self.jail.resolve(src_shown), self.jail.resolve(dst_shown)
        if src in self.jail.roots:
            raise ToolError(f"{src_shown}: refused: a workspace root cannot be moved")
        sfd, sname = self.jail.parent(src, src_shown)
        try:
            dfd, dname = self.jail.parent(dst, dst_shown)
            try:
                # Neither end may be (or hold, or be the place of) one of llmc's own files: moving an
                # ancestor away would let the profile be edited under another name.
                self.jail.guard(sfd, sname, src_shown)
                self.jail.guard(dfd, dname, dst_shown)
                if P.lstat_at(sfd, sname) is None:
                    raise ToolError(f"{src_shown}: not found")
                if P.lstat_at(dfd, dname) is not None:
                    raise ToolError(f"{dst_shown}: already exists; nothing was moved")
                os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            except OSError as exc:
                raise P.os_error(src_shown, exc) from None
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)
        return {"source": self.jail.relative(src), "destination": self.jail.relative(dst)}

    # ------------------------------------------------------------------ search
    def start_search(self, args: dict[str, Any]) -> dict[str, Any]:
        shown = args.get("path", ".")
        real = self.jail.resolve(shown)
        if not os.path.isdir(real):
            raise ToolError(f"{shown}: not a directory")
        search = self.searches.start(
            jail=self.jail, root=real, shown=shown, pattern=args["pattern"], kind=args.get("kind", "files"),
            regex=args.get("regex", False), case_sensitive=args.get("case_sensitive", False),
            file_pattern=args.get("file_pattern"),
            max_results=min(args.get("max_results", self.options["max_results"]), self.options["max_results"]),
            max_file_bytes=self.options["max_file_bytes"], timeout=float(self.options["search_timeout"]),
            max_depth=args.get("max_depth", 30))
        search.wait(args.get("wait_ms", 500) / 1000)
        return search.page(0, 100)

    def get_more_search_results(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.searches.get(args["search_id"]).page(args.get("offset", 0), args.get("limit", 100))

    def stop_search(self, args: dict[str, Any]) -> dict[str, Any]:
        search = self.searches.get(args["search_id"])
        search.stop()
        search.wait(2.0)
        return search.status()

    def list_searches(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"searches": [s.status() for s in self.searches.list()]}

    # ------------------------------------------------------------------ processes
    def _cwd(self, args: dict[str, Any]) -> str:
        shown = args.get("cwd", ".")
        real = self.jail.resolve(shown)
        if not os.path.isdir(real):
            raise ToolError(f"{shown}: not a directory")
        return real

    def start_process(self, args: dict[str, Any]) -> dict[str, Any]:
        cwd = self._cwd(args)
        argv = self.launcher.resolve(args.get("argv"), args.get("command"), cwd)
        proc = self.processes.start(argv, cwd, stdin=True, timeout=args.get("timeout_s"))
        proc.wait_quiet(0, args.get("wait_ms", 3000) / 1000, args.get("quiet_ms", 500) / 1000)
        return _output(proc, 0, PAGE_BYTES)

    def read_process_output(self, args: dict[str, Any]) -> dict[str, Any]:
        proc = self.processes.get(args["handle"])
        offset = args.get("offset", 0)
        if args.get("wait_ms", 0):
            proc.wait_quiet(offset, args["wait_ms"] / 1000, 0.2)
        return _output(proc, offset, args.get("length", PAGE_BYTES))

    def interact_with_process(self, args: dict[str, Any]) -> dict[str, Any]:
        proc = self.processes.get(args["handle"])
        text = args["input"] + ("\n" if args.get("newline", True) and not args["input"].endswith("\n") else "")
        since = len(proc.output)
        self.processes.write(proc, text.encode("utf-8"))
        proc.wait_quiet(since, args.get("wait_ms", 3000) / 1000, args.get("quiet_ms", 300) / 1000)
        return _output(proc, since, PAGE_BYTES)

    def terminate_process(self, args: dict[str, Any]) -> dict[str, Any]:
        proc = self.processes.get(args["handle"])
        proc.kill("terminated")
        return proc.status()

    def list_processes(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"processes": [p.status() for p in self.processes.list()]}

    def run_command(self, args: dict[str, Any]) -> dict[str, Any]:
        cwd = self._cwd(args)
        argv = self.launcher.resolve(args.get("argv"), args.get("command"), cwd)
        timeout = min(float(args.get("timeout_s", 30)), float(self.options["timeout"]))
        data = args["input"].encode("utf-8") if "input" in args else None
        proc = self.processes.start(argv, cwd, stdin=False, input_data=data, timeout=timeout + 60)
        deadline = time.monotonic() + timeout
        with proc.cond:
            while not (proc.eof and proc.popen.poll() is not None) and time.monotonic() < deadline:
                proc.cond.wait(timeout=min(max(deadline - time.monotonic(), 0.01), 0.2))
        timed_out = proc.running or not proc.eof
        if timed_out:
            proc.kill(f"time limit of {timeout:g} s")
            proc.wait_quiet(len(proc.output), 1.0, 0.05)  # let the reader see the end
        out = _output(proc, 0, self.options["max_read_bytes"])
        out.update(timedOut=timed_out, truncated=out["nextOffset"] < len(proc.output) or "output limit" in (proc.ended_by or ""))
        for key in ("offset", "nextOffset"):
            out.pop(key, None)
        return out

    # ------------------------------------------------------------------ configuration
    def get_config(self, args: dict[str, Any]) -> dict[str, Any]:
        o = self.options
        return {"roots": self.jail.roots, "readOnly": self.read_only, "offLimits": self.jail.protected.names,
                "processes": {"enabled": self.processes_enabled, "note": self.process_note,
                              "sandbox": self.launcher.sandbox, "allowCommands": sorted(self.launcher.allowed),
                              "allowShell": o["allow_shell"], "allowNetwork": o["allow_network"],
                              "path": FIXED_PATH, "timeoutSeconds": o["timeout"], "maxProcesses": o["max_processes"],
                              "maxOutputBytes": o["max_output_bytes"], "limits": self.launcher.limits(),
                              "environment": sorted(self.launcher.environment())},
                "limits": {k: o[k] for k in ("max_read_bytes", "max_file_bytes", "max_write_bytes", "max_results",
                                             "search_timeout")},
                "tools": "fixed at start; no tool changes this configuration"}


def _output(proc: Any, offset: int, length: int) -> dict[str, Any]:
    with proc.cond:
        data = bytes(proc.output[offset:offset + length])
        total = len(proc.output)
    out = {**proc.status(), "offset": offset, "output": data.decode("utf-8", "replace"),
           "nextOffset": min(offset, total) + len(data)}
    return out


def _kind(st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "symlink" if stat.S_ISLNK(st.st_mode) else "other"


def _utf8_prefix(head: bytes) -> bool:
    """Is this the start of UTF-8 text? (An incomplete character at the cut is fine.)"""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return True
    except UnicodeDecodeError:
        return False


def protected_paths(extra: list[str]) -> list[str]:
    """llmc's own files, off limits (a directory's path ends with "/"): the config and state
    directories as this process sees them, those its parent llmc named in PROTECTED_PATHS_VAR,
    and `extra`. A union: nothing can shrink it."""
    import json

    from llmc_cli.config.paths import PROTECTED_PATHS_VAR, config_dir, state_dir

    paths = [f"{config_dir()}/", f"{state_dir()}/", *extra]
    raw = os.environ.get(PROTECTED_PATHS_VAR)
    if raw:
        try:
            inherited = json.loads(raw)
        except ValueError:
            inherited = None
        if not isinstance(inherited, list) or not all(isinstance(p, str) and p for p in inherited):
            raise ConfigError(f"workspace: {PROTECTED_PATHS_VAR} must be a JSON list of paths")
        paths += inherited
    return paths


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"workspace: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(OPTIONS))}")
    out: dict[str, Any] = {}
    for name, (types, default) in OPTIONS.items():
        value = options.get(name, default)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ConfigError(f"workspace: option {name} has the wrong type ({type(value).__name__})")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"workspace: option {name} must be positive")
        out[name] = value
    if out["sandbox"] not in ("auto", "bwrap", "none"):
        raise ConfigError(f"workspace: sandbox must be auto, bwrap or none, not {out['sandbox']!r}")
    if not all(isinstance(c, str) and c for c in out["allow_commands"]):
        raise ConfigError("workspace: allow_commands must be a list of executable names or paths")
    if not all(isinstance(p, str) and p for p in out["protect"]):
        raise ConfigError("workspace: protect must be a list of paths")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in out["env"].items()):
        raise ConfigError("workspace: env must map names to strings")
    return out

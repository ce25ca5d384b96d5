"""The built-in workspace server: files, search and processes under the workspace roots.

Desktop Commander's abilities without its weak points: nothing outside the roots (jail.py),
no command that is not allow-listed and no shell unless configured (processes.py), and no tool
that changes the configuration. The tools are declared in workspace_tools.py, the options
checked in workspace_options.py. `read_only` hides every writing tool and every process tool.

    make_workspace_server(roots, read_only, **options) -> endpoint with handle(message, send)
"""

from __future__ import annotations

import codecs
import os
import stat
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from llmc_cli import __version__, server
from llmc_cli.errors import ConfigError
from llmc_cli.mcp.server import McpServer, ToolDef, ToolError
from llmc_cli.server import jail as P
from llmc_cli.server.launcher import Launcher, ProcessConfig
from llmc_cli.server.sandbox import FIXED_PATH
from llmc_cli.server.search import Searches, iso_time
from llmc_cli.server.workspace_options import check_options, protected_paths
from llmc_cli.server.workspace_results import (
    CommandResult,
    CreateResult,
    EditResult,
    Entry,
    FileInfo,
    Listing,
    MoveResult,
    ProcessList,
    ProcessOutput,
    ProcessStatus,
    ReadError,
    ReadManyResult,
    ReadResult,
    SearchList,
    SearchPage,
    SearchStatus,
    WriteResult,
)
from llmc_cli.server.workspace_tools import PAGE_BYTES, workspace_tools

if TYPE_CHECKING:
    from llmc_cli.server.processes import Process, ProcessTable

SNIFF_BYTES = 8192


def make_workspace_server(roots: list[str] | None = None, read_only: bool = True, **options: object) -> McpServer:
    """The endpoint (handle(message, send), close()) for the in-memory transport or run_stdio."""
    workspace = Workspace(roots if roots is not None else ["."], read_only, options)
    return McpServer(
        "llmc-workspace",
        __version__,
        workspace.tools(),
        instructions=workspace.instructions(),
        page_size=workspace.options["page_size"],
        on_close=workspace.close,
    )


class Workspace:
    def __init__(self, roots: list[str], read_only: bool, options: dict[str, Any]) -> None:
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            raise ConfigError("workspace: roots must be a list of directory paths")
        if not isinstance(read_only, bool):
            raise ConfigError("workspace: read_only must be true or false")
        self.options = check_options(options)
        self.jail = P.Jail(roots, protect=protected_paths(self.options["protect"]))
        self.read_only = read_only
        self.searches = Searches()
        self.launcher = Launcher(
            ProcessConfig(
                roots=self.jail.roots,
                hidden=self.jail.protected.names,
                hidden_dirs=self.jail.protected.dirs,
                allow_commands=self.options["allow_commands"],
                allow_shell=self.options["allow_shell"],
                allow_network=self.options["allow_network"],
                sandbox=self.options["sandbox"],
                timeout=float(self.options["timeout"]),
                max_output_bytes=self.options["max_output_bytes"],
                max_processes=self.options["max_processes"],
                max_user_processes=self.options["max_user_processes"],
                max_memory_bytes=self.options["max_memory_bytes"],
                max_cpu_seconds=self.options["max_cpu_seconds"],
                env=self.options["env"],
            )
        )
        self._processes: ProcessTable | None = None  # made with the first process (see the property)
        self._processes_made = threading.Lock()
        enabled, self.process_note = self.launcher.enabled()
        if read_only:
            enabled, self.process_note = False, "read-only mode: no process runs"
        self.processes_enabled = enabled

    @property
    def processes(self) -> ProcessTable:
        """The process table, made (and subprocess loaded) when a process tool is first used."""
        with self._processes_made:
            if self._processes is None:
                self._processes = server.ProcessTable(self.launcher)
            return self._processes

    def close(self) -> None:
        self.searches.close()
        if self._processes is not None:
            self._processes.close()

    def instructions(self) -> str:
        roots = ", ".join(self.jail.roots)
        mode = "read-only" if self.read_only else "read-write"
        return (
            f"Files under the workspace roots ({roots}), {mode}. Relative paths start at {self.jail.roots[0]}. "
            f"Paths outside the roots are refused. Processes: {self.process_note}."
        )

    # ------------------------------------------------------------------ registry
    def tools(self) -> list[ToolDef]:
        return workspace_tools(self)

    # ------------------------------------------------------------------ files
    def read_file(self, args: dict[str, Any], budget: int | None = None) -> ReadResult:
        shown = args["path"]
        real = self.jail.resolve(shown)
        offset, length = args.get("offset", 0), args.get("length", 1000)
        budget = self.options["max_read_bytes"] if budget is None else budget
        fd = self.jail.open_read(real, shown)
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(fd).st_size
            if size > self.options["max_file_bytes"]:
                raise ToolError(
                    f"{shown}: refused: {size} bytes, larger than the limit of {self.options['max_file_bytes']} bytes"
                )
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
        out: ReadResult = {
            "path": self.jail.relative(real),
            "content": b"".join(picked).decode("utf-8", "replace"),
            "offset": first,
            "lines": len(picked),
            "totalLines": total,
            "size": size,
            "truncated": truncated,
        }
        if offset >= 0 and first + len(picked) < total:
            out["nextOffset"] = first + len(picked)
        return out

    def read_multiple_files(self, args: dict[str, Any]) -> ReadManyResult:
        budget = self.options["max_read_bytes"]
        files: list[ReadResult | ReadError] = []
        for path in args["paths"]:
            try:
                result = self.read_file({"path": path, "length": args.get("length", 1000)}, budget=budget)
                budget = max(budget - len(result["content"].encode()), 0)
                files.append(result)
            except ToolError as exc:
                files.append({"path": path, "error": str(exc)})
        return {"files": files}

    def list_directory(self, args: dict[str, Any]) -> Listing:
        shown = args.get("path", ".")
        real = self.jail.resolve(shown)
        entries: list[Entry] = []
        truncated = False
        for rel, st in self.jail.walk(real, shown, args.get("depth", 1)):
            if len(entries) >= self.options["max_results"]:
                truncated = True
                break
            entries.append({"name": rel, "type": _kind(st), "size": st.st_size, "modified": iso_time(st.st_mtime)})
        return {"path": self.jail.relative(real), "entries": entries, "truncated": truncated}

    def get_file_info(self, args: dict[str, Any]) -> FileInfo:
        shown = args["path"]
        real = self.jail.resolve(shown)
        try:
            st = os.stat(real, follow_symlinks=False)
        except OSError as exc:
            raise P.os_error(shown, exc) from None
        return {
            "path": self.jail.relative(real),
            "type": _kind(st),
            "size": st.st_size,
            "modified": iso_time(st.st_mtime),
            "accessed": iso_time(st.st_atime),
            "changed": iso_time(st.st_ctime),
            "permissions": oct(stat.S_IMODE(st.st_mode))[2:],
            "links": st.st_nlink,
        }

    def write_file(self, args: dict[str, Any]) -> WriteResult:
        shown, mode = args["path"], args.get("mode", "rewrite")
        data = args["content"].encode("utf-8")
        if len(data) > self.options["max_write_bytes"]:
            raise ToolError(
                f"{shown}: refused: {len(data)} bytes, more than the limit of {self.options['max_write_bytes']} bytes per write"
            )
        real = self.jail.resolve(shown)
        write = self.jail.append if mode == "append" else self.jail.write_atomic
        created = write(real, shown, data)
        return {"path": self.jail.relative(real), "mode": mode, "bytesWritten": len(data), "created": created}

    def edit_block(self, args: dict[str, Any]) -> EditResult:
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

    def create_directory(self, args: dict[str, Any]) -> CreateResult:
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

    def move_file(self, args: dict[str, Any]) -> MoveResult:
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
    def start_search(self, args: dict[str, Any]) -> SearchPage:
        shown = args.get("path", ".")
        real = self.jail.resolve(shown)
        if not os.path.isdir(real):
            raise ToolError(f"{shown}: not a directory")
        search = self.searches.start(
            jail=self.jail,
            root=real,
            shown=shown,
            pattern=args["pattern"],
            kind=args.get("kind", "files"),
            regex=args.get("regex", False),
            case_sensitive=args.get("case_sensitive", False),
            file_pattern=args.get("file_pattern"),
            max_results=min(args.get("max_results", self.options["max_results"]), self.options["max_results"]),
            max_file_bytes=self.options["max_file_bytes"],
            timeout=float(self.options["search_timeout"]),
            max_depth=args.get("max_depth", 30),
        )
        search.wait(args.get("wait_ms", 500) / 1000)
        return search.page(0, 100)

    def get_more_search_results(self, args: dict[str, Any]) -> SearchPage:
        return self.searches.get(args["search_id"]).page(args.get("offset", 0), args.get("limit", 100))

    def stop_search(self, args: dict[str, Any]) -> SearchStatus:
        search = self.searches.get(args["search_id"])
        search.stop()
        search.wait(2.0)
        return search.status()

    def list_searches(self, args: dict[str, Any]) -> SearchList:
        return {"searches": [s.status() for s in self.searches.list()]}

    # ------------------------------------------------------------------ processes
    def _cwd(self, args: dict[str, Any]) -> str:
        shown = args.get("cwd", ".")
        real = self.jail.resolve(shown)
        if not os.path.isdir(real):
            raise ToolError(f"{shown}: not a directory")
        return real

    def start_process(self, args: dict[str, Any]) -> ProcessOutput:
        cwd = self._cwd(args)
        argv = self.launcher.resolve(args.get("argv"), args.get("command"), cwd)
        proc = self.processes.start(argv, cwd, stdin=True, timeout=args.get("timeout_s"))
        proc.wait_quiet(0, args.get("wait_ms", 3000) / 1000, args.get("quiet_ms", 500) / 1000)
        return _output(proc, 0, PAGE_BYTES)

    def read_process_output(self, args: dict[str, Any]) -> ProcessOutput:
        proc = self.processes.get(args["handle"])
        offset = args.get("offset", 0)
        if args.get("wait_ms", 0):
            proc.wait_quiet(offset, args["wait_ms"] / 1000, 0.2)
        return _output(proc, offset, args.get("length", PAGE_BYTES))

    def interact_with_process(self, args: dict[str, Any]) -> ProcessOutput:
        proc = self.processes.get(args["handle"])
        text = args["input"] + ("\n" if args.get("newline", True) and not args["input"].endswith("\n") else "")
        since = len(proc.output)
        self.processes.write(proc, text.encode("utf-8"))
        proc.wait_quiet(since, args.get("wait_ms", 3000) / 1000, args.get("quiet_ms", 300) / 1000)
        return _output(proc, since, PAGE_BYTES)

    def terminate_process(self, args: dict[str, Any]) -> ProcessStatus:
        proc = self.processes.get(args["handle"])
        proc.kill("terminated")
        return proc.status()

    def list_processes(self, args: dict[str, Any]) -> ProcessList:
        return {"processes": [p.status() for p in self._processes.list()] if self._processes is not None else []}

    def run_command(self, args: dict[str, Any]) -> CommandResult:
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
        status, output, next_offset = _page(proc, 0, self.options["max_read_bytes"])
        truncated = next_offset < len(proc.output) or "output limit" in (proc.ended_by or "")
        return {**status, "output": output, "timedOut": timed_out, "truncated": truncated}

    # ------------------------------------------------------------------ configuration
    def get_config(self, args: dict[str, Any]) -> dict[str, Any]:
        o = self.options
        return {
            "roots": self.jail.roots,
            "readOnly": self.read_only,
            "offLimits": self.jail.protected.names,
            "processes": {
                "enabled": self.processes_enabled,
                "note": self.process_note,
                "sandbox": self.launcher.sandbox,
                "allowCommands": sorted(self.launcher.allowed),
                "allowShell": o["allow_shell"],
                "allowNetwork": o["allow_network"],
                "path": FIXED_PATH,
                "timeoutSeconds": o["timeout"],
                "maxProcesses": o["max_processes"],
                "maxOutputBytes": o["max_output_bytes"],
                "limits": self.launcher.limits(),
                "environment": sorted(self.launcher.environment()),
            },
            "limits": {k: o[k] for k in ("max_read_bytes", "max_file_bytes", "max_write_bytes", "max_results", "search_timeout")},
            "tools": "fixed at start; no tool changes this configuration",
        }


def _page(proc: Process, offset: int, length: int) -> tuple[ProcessStatus, str, int]:
    """The process's status, its output from `offset` (at most `length` bytes) and where the next read starts."""
    with proc.cond:
        data = bytes(proc.output[offset : offset + length])
        total = len(proc.output)
    return proc.status(), data.decode("utf-8", "replace"), min(offset, total) + len(data)


def _output(proc: Process, offset: int, length: int) -> ProcessOutput:
    status, output, next_offset = _page(proc, offset, length)
    return {**status, "offset": offset, "output": output, "nextOffset": next_offset}


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

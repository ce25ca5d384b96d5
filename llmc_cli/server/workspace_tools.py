"""The workspace server's tool declarations: names, descriptions, input and output schemas, hints,
and the Workspace method each one runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from llmc_cli.mcp.server import ToolDef
from llmc_cli.model import JSON, JSONObject
from llmc_cli.server.workspace_text import TEXT

if TYPE_CHECKING:
    from llmc_cli.server.workspace import Workspace

PAGE_BYTES = 20_000  # default output page of a process

READ_ONLY: JSONObject = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def _hints(destructive: bool, idempotent: bool, open_world: bool = False) -> JSONObject:
    return {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent, "openWorldHint": open_world}


def _obj(props: Mapping[str, JSON], required: list[str] | None = None, *, closed: bool = True) -> JSONObject:
    schema: JSONObject = {"type": "object", "properties": dict(props)}
    if required:
        names: list[JSON] = list(required)
        schema["required"] = names
    if closed:
        schema["additionalProperties"] = False
    return schema


STR: JSONObject = {"type": "string"}
INT: JSONObject = {"type": "integer"}
BOOL: JSONObject = {"type": "boolean"}
NINT: JSONObject = {"type": ["integer", "null"]}
PATH: JSONObject = {"type": "string", "description": "Path inside a workspace root; relative paths start at the first root."}
ENTRY = _obj(
    {"name": STR, "type": {"type": "string", "enum": ["file", "directory", "symlink", "other"]}, "size": INT, "modified": STR},
    ["name", "type", "size", "modified"],
    closed=False,
)
READ_OUT = _obj(
    {
        "path": STR,
        "content": STR,
        "offset": INT,
        "lines": INT,
        "totalLines": INT,
        "size": INT,
        "truncated": BOOL,
        "nextOffset": INT,
    },
    ["path", "content", "offset", "lines", "totalLines", "size", "truncated"],
    closed=False,
)
PROC_STATUS: JSONObject = {
    "handle": STR,
    "argv": {"type": "array", "items": STR},
    "pid": INT,
    "running": BOOL,
    "exitCode": NINT,
    "outputBytes": INT,
    "startedAt": STR,
    "endedBy": STR,
}
PROC_OUT = _obj(
    {**PROC_STATUS, "offset": INT, "output": STR, "nextOffset": INT, "skippedBytes": INT},
    ["handle", "running", "exitCode", "offset", "output", "nextOffset"],
    closed=False,
)
SEARCH_STATUS: JSONObject = {
    "searchId": STR,
    "kind": STR,
    "pattern": STR,
    "path": STR,
    "done": BOOL,
    "resultCount": INT,
    "elapsedMs": INT,
    "stoppedBy": STR,
}
SEARCH_PAGE = _obj(
    {
        **SEARCH_STATUS,
        "offset": INT,
        "totalResults": INT,
        "nextOffset": INT,
        "results": {"type": "array", "items": {"type": "object"}},
    },
    ["searchId", "done", "offset", "results", "totalResults"],
    closed=False,
)


def workspace_tools(ws: Workspace) -> list[ToolDef]:
    """The workspace's tools: files and searches, the writing ones unless read-only, the process
    tools when processes are enabled."""
    limit = ws.options["max_results"]
    tools = [
        ToolDef(
            "read_file",
            "Read a UTF-8 text file by lines: `offset` is the first line (0-based; negative "
            "counts from the end, e.g. -20 = the last 20 lines), `length` the number of lines. Returns the "
            "total line count. Binary files are refused.",
            _obj(
                {
                    "path": PATH,
                    "offset": {**INT, "default": 0},
                    "length": {**INT, "minimum": 1, "maximum": 100_000, "default": 1000},
                },
                ["path"],
            ),
            ws.read_file,
            READ_OUT,
            READ_ONLY,
        ),
        ToolDef(
            "read_multiple_files",
            "Read several text files at once (first `length` lines of each); a file "
            "that cannot be read gets an error entry instead of failing the call.",
            _obj(
                {
                    "paths": {"type": "array", "items": STR, "minItems": 1, "maxItems": 50},
                    "length": {**INT, "minimum": 1, "maximum": 100_000, "default": 1000},
                },
                ["paths"],
            ),
            ws.read_multiple_files,
            _obj({"files": {"type": "array", "items": {"type": "object"}}}, ["files"]),
            READ_ONLY,
        ),
        ToolDef(
            "list_directory",
            f"List a directory, `depth` levels deep (1 = its entries only), at most "
            f"{limit} entries, with type, size and modification time (UTC). Symbolic links are listed, "
            "not followed.",
            _obj({"path": {**PATH, "default": "."}, "depth": {**INT, "minimum": 1, "maximum": 10, "default": 1}}),
            ws.list_directory,
            _obj(
                {"path": STR, "entries": {"type": "array", "items": ENTRY}, "truncated": BOOL}, ["path", "entries", "truncated"]
            ),
            READ_ONLY,
        ),
        ToolDef(
            "get_file_info",
            "Type, size, times (UTC), permissions and link count of a file or directory.",
            _obj({"path": PATH}, ["path"]),
            ws.get_file_info,
            _obj(
                {
                    "path": STR,
                    "type": STR,
                    "size": INT,
                    "modified": STR,
                    "accessed": STR,
                    "changed": STR,
                    "permissions": STR,
                    "links": INT,
                },
                ["path", "type", "size", "modified", "permissions", "links"],
                closed=False,
            ),
            READ_ONLY,
        ),
        ToolDef(
            "start_search",
            "Start a background search under `path`: kind 'files' matches file names "
            "against a glob `pattern` (e.g. '*.log'; a pattern with '/' matches the relative path), kind "
            "'content' finds lines containing `pattern` (plain text, or a regular expression with "
            "regex=true) in text files, optionally only files matching `file_pattern`. Returns the first "
            f"results and a searchId for get_more_search_results. At most {limit} results.",
            _obj(
                {
                    "pattern": {**STR, "minLength": 1},
                    "path": {**PATH, "default": "."},
                    "kind": {"type": "string", "enum": ["files", "content"], "default": "files"},
                    "regex": {**BOOL, "default": False},
                    "case_sensitive": {**BOOL, "default": False},
                    "file_pattern": STR,
                    "max_results": {**INT, "minimum": 1, "maximum": limit, "default": limit},
                    "max_depth": {**INT, "minimum": 1, "maximum": 100, "default": 30},
                    "wait_ms": {**INT, "minimum": 0, "maximum": 30_000, "default": 500},
                },
                ["pattern"],
            ),
            ws.start_search,
            SEARCH_PAGE,
            READ_ONLY,
        ),
        ToolDef(
            "get_more_search_results",
            "Results of a search from `offset` on (a page of at most `limit`).",
            _obj(
                {
                    "search_id": STR,
                    "offset": {**INT, "minimum": 0, "default": 0},
                    "limit": {**INT, "minimum": 1, "maximum": 1000, "default": 100},
                },
                ["search_id"],
            ),
            ws.get_more_search_results,
            SEARCH_PAGE,
            READ_ONLY,
        ),
        ToolDef(
            "stop_search",
            "Stop a running search; its results so far stay readable.",
            _obj({"search_id": STR}, ["search_id"]),
            ws.stop_search,
            _obj(SEARCH_STATUS, ["searchId", "done"], closed=False),
            READ_ONLY,
        ),
        ToolDef(
            "list_searches",
            "The searches of this session, running and finished.",
            _obj({}),
            ws.list_searches,
            _obj({"searches": {"type": "array", "items": _obj(SEARCH_STATUS, closed=False)}}, ["searches"]),
            READ_ONLY,
        ),
        ToolDef(
            "get_config",
            "The effective configuration of this server (roots, modes, allowed commands, "
            "sandbox, limits). Read-only: no tool can change it.",
            _obj({}),
            ws.get_config,
            _obj({"roots": {"type": "array", "items": STR}, "readOnly": BOOL}, ["roots", "readOnly"], closed=False),
            READ_ONLY,
        ),
    ]
    if not ws.read_only:
        tools += [
            ToolDef(
                "write_file",
                "Write a UTF-8 text file: mode 'rewrite' replaces it (atomically: never "
                "half-written), 'append' adds to its end. Creates the file, not its directory. At most "
                f"{ws.options['max_write_bytes']} bytes per call.",
                _obj(
                    {
                        "path": PATH,
                        "content": STR,
                        "mode": {"type": "string", "enum": ["rewrite", "append"], "default": "rewrite"},
                    },
                    ["path", "content"],
                ),
                ws.write_file,
                _obj(
                    {"path": STR, "mode": STR, "bytesWritten": INT, "created": BOOL}, ["path", "mode", "bytesWritten", "created"]
                ),
                _hints(destructive=True, idempotent=False),
            ),
            ToolDef(
                "edit_block",
                "Replace exact text in a file: `old_text` must occur exactly "
                "`expected_replacements` times (default 1), otherwise nothing is written.",
                _obj(
                    {
                        "path": PATH,
                        "old_text": {**STR, "minLength": 1},
                        "new_text": STR,
                        "expected_replacements": {**INT, "minimum": 1, "default": 1},
                    },
                    ["path", "old_text", "new_text"],
                ),
                ws.edit_block,
                _obj({"path": STR, "replacements": INT}, ["path", "replacements"]),
                _hints(destructive=True, idempotent=False),
            ),
            ToolDef(
                "create_directory",
                "Create a directory and any missing parents (fine if it exists).",
                _obj({"path": PATH}, ["path"]),
                ws.create_directory,
                _obj({"path": STR, "created": BOOL}, ["path", "created"]),
                _hints(destructive=False, idempotent=True),
            ),
            ToolDef(
                "move_file",
                "Move or rename a file or directory inside the roots. Refuses to overwrite an existing destination.",
                _obj({"source": PATH, "destination": PATH}, ["source", "destination"]),
                ws.move_file,
                _obj({"source": STR, "destination": STR}, ["source", "destination"]),
                _hints(destructive=True, idempotent=False),
            ),
        ]
    if ws.processes_enabled:
        tools += _process_tools(ws)

    for tool in tools:
        tool.text = TEXT[tool.name]
    return tools


def _process_tools(ws: Workspace) -> list[ToolDef]:
    allowed = ", ".join(sorted(set(ws.launcher.allowed.values()))) or "none"
    run: JSONObject = {
        "argv": {
            "type": "array",
            "items": STR,
            "minItems": 1,
            "description": f"Program and arguments, no shell. Allowed programs: {allowed}.",
        },
        "cwd": {**PATH, "default": "."},
    }
    if ws.options["allow_shell"]:
        run["command"] = {**STR, "description": "A shell command line run by /bin/sh -c (instead of argv)."}
    limit = float(ws.options["timeout"])
    return [
        ToolDef(
            "start_process",
            "Start a process (argv, no shell) in its own sandbox and return its handle "
            "with the first output, once it is quiet (e.g. waiting for input) or `wait_ms` passed. "
            f"It is ended after `timeout_s` (at most {limit:g} s) or "
            f"{ws.options['max_output_bytes']} bytes of output.",
            _obj(
                {
                    **run,
                    "timeout_s": {"type": "number", "minimum": 0.1, "maximum": limit},
                    "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 3000},
                    "quiet_ms": {**INT, "minimum": 10, "maximum": 10_000, "default": 500},
                }
            ),
            ws.start_process,
            PROC_OUT,
            _hints(destructive=True, idempotent=False, open_world=True),
        ),
        ToolDef(
            "read_process_output",
            "Output of a process (stdout and stderr merged) from byte `offset` on; optionally wait up to `wait_ms` for more.",
            _obj(
                {
                    "handle": STR,
                    "offset": {**INT, "minimum": 0, "default": 0},
                    "length": {**INT, "minimum": 1, "maximum": 200_000, "default": PAGE_BYTES},
                    "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 0},
                },
                ["handle"],
            ),
            ws.read_process_output,
            PROC_OUT,
            READ_ONLY,
        ),
        ToolDef(
            "interact_with_process",
            "Send a line of input to a process and return what it prints in reply (once quiet or after `wait_ms`).",
            _obj(
                {
                    "handle": STR,
                    "input": STR,
                    "newline": {**BOOL, "default": True},
                    "wait_ms": {**INT, "minimum": 0, "maximum": 60_000, "default": 3000},
                    "quiet_ms": {**INT, "minimum": 10, "maximum": 10_000, "default": 300},
                },
                ["handle", "input"],
            ),
            ws.interact_with_process,
            PROC_OUT,
            _hints(destructive=True, idempotent=False, open_world=True),
        ),
        ToolDef(
            "terminate_process",
            "End a process and everything it started (SIGTERM, then SIGKILL).",
            _obj({"handle": STR}, ["handle"]),
            ws.terminate_process,
            _obj(PROC_STATUS, ["handle", "running", "exitCode"], closed=False),
            _hints(destructive=True, idempotent=True),
        ),
        ToolDef(
            "list_processes",
            "The processes started in this session, running and finished.",
            _obj({}),
            ws.list_processes,
            _obj({"processes": {"type": "array", "items": _obj(PROC_STATUS, closed=False)}}, ["processes"]),
            READ_ONLY,
        ),
        ToolDef(
            "run_command",
            "Run a command to completion (argv, no shell) with a time limit; returns its "
            "exit code and output (stdout and stderr merged). `input` is sent to its standard input.",
            _obj(
                {
                    **run,
                    "input": STR,
                    "timeout_s": {"type": "number", "minimum": 0.1, "maximum": limit, "default": min(30, limit)},
                }
            ),
            ws.run_command,
            _obj(
                {**PROC_STATUS, "output": STR, "timedOut": BOOL, "truncated": BOOL},
                ["handle", "exitCode", "output", "timedOut", "truncated"],
                closed=False,
            ),
            _hints(destructive=True, idempotent=False, open_world=True),
        ),
    ]

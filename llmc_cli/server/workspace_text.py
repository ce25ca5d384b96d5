"""What the workspace's tools say as text: the content itself (a file's text, a listing's lines, a
search's matches, a process's output), as Desktop Commander and `cat`, `ls`, `grep` show it. The
result's metadata (sizes, offsets, handles, what was cut off) is in structuredContent, declared by
each tool's outputSchema; a note in brackets, in a text block of its own after the content, says
what a reader of the text alone must know to go on (there is more, the process still runs).

Each function takes the tool's structured result and returns its text blocks."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from llmc_cli.server.workspace_results import (
    CommandResult,
    CreateResult,
    EditResult,
    FileInfo,
    Listing,
    MoveResult,
    ProcessList,
    ProcessOutput,
    ProcessStatus,
    ReadManyResult,
    ReadResult,
    SearchList,
    SearchPage,
    SearchStatus,
    WriteResult,
)

Blocks = list[str]


def read_file(out: ReadResult) -> Blocks:
    return [out["content"], *_more_lines(out)]


def _more_lines(out: ReadResult) -> Blocks:
    """The note of a partial read: which lines these are, and where the next read starts."""
    if "nextOffset" not in out and not out["truncated"]:
        return []
    first, count = out["offset"], out["lines"]
    shown = f"lines {first + 1}-{first + count}" if count else "no lines"
    more = f"; continue with offset={out['nextOffset']}" if "nextOffset" in out else ""
    return [f"[{out['path']}: {shown} of {out['totalLines']}{more}]"]


def read_multiple_files(out: ReadManyResult) -> Blocks:
    """Each file under a `==> path <==` header (as `head` and `tail` show several files)."""
    blocks: Blocks = []
    for entry in out["files"]:
        if "error" in entry:
            blocks.append(f"==> {entry['path']} <==\n[error: {entry['error']}]")
        else:
            blocks.append(f"==> {entry['path']} <==\n{entry['content']}")
            blocks += _more_lines(entry)
    return blocks


def list_directory(out: Listing) -> Blocks:
    """One entry per line, a directory with a trailing / (as `ls -p`)."""
    lines = [e["name"] + ("/" if e["type"] == "directory" else "") for e in out["entries"]]
    blocks = ["\n".join(lines)]
    if out["truncated"]:
        blocks.append(f"[{out['path']}: the first {len(lines)} entries only; list a subdirectory or less depth]")
    return blocks


def get_file_info(out: FileInfo) -> Blocks:
    return ["\n".join(f"{key}: {value}" for key, value in out.items())]


def search_page(out: SearchPage) -> Blocks:
    """Matches as `grep -n` prints them (path:line:text), found files one per line; a note when
    there are more (or the search still runs)."""
    lines = [f"{r['path']}:{r['line']}:{r['text']}" if "line" in r else str(r.get("path", "")) for r in out["results"]]
    blocks = ["\n".join(lines)]
    if "nextOffset" in out:
        state = "still running" if not out["done"] else f"{out['totalResults']} results"
        blocks.append(
            f"[search {out['searchId']}: {state}; more with get_more_search_results "
            f"search_id={out['searchId']} offset={out['nextOffset']}]"
        )
    elif out.get("stoppedBy"):
        blocks.append(f"[search {out['searchId']}: stopped by {out['stoppedBy']}]")
    return blocks


def _search_line(status: SearchStatus) -> str:
    state = "done" if status["done"] else "running"
    stopped = f", stopped by {status['stoppedBy']}" if status.get("stoppedBy") else ""
    return (
        f"{status['searchId']}: {state}{stopped}, {status['resultCount']} results, {status['kind']} "
        f"{status['pattern']!r} under {status['path']}"
    )


def stop_search(out: SearchStatus) -> Blocks:
    return [_search_line(out)]


def list_searches(out: SearchList) -> Blocks:
    return ["\n".join(_search_line(s) for s in out["searches"])]


def get_config(out: Mapping[str, object]) -> Blocks:

    return [json.dumps(out, ensure_ascii=False, indent=2)]  # nested settings: JSON is their plain form


def write_file(out: WriteResult) -> Blocks:
    verb = "appended" if out["mode"] == "append" else "wrote"
    return [f"{verb} {out['bytesWritten']} bytes to {out['path']}{' (created)' if out['created'] else ''}"]


def edit_block(out: EditResult) -> Blocks:
    return [f"replaced {out['replacements']} occurrence(s) in {out['path']}"]


def create_directory(out: CreateResult) -> Blocks:
    return [f"created {out['path']}" if out["created"] else f"{out['path']} already exists"]


def move_file(out: MoveResult) -> Blocks:
    return [f"moved {out['source']} to {out['destination']}"]


def _process_state(status: ProcessStatus) -> str:
    if status.get("running"):
        return f"process {status['handle']} (pid {status.get('pid')}) is running"
    ended = f" ({status['endedBy']})" if status.get("endedBy") else ""
    return f"process {status['handle']} exited with code {status.get('exitCode')}{ended}"


def process_output(out: ProcessOutput) -> Blocks:
    """The output itself, then the process's state and where the next read starts."""
    return [out["output"], f"[{_process_state(out)}; output continues at offset={out['nextOffset']}]"]


def run_command(out: CommandResult) -> Blocks:
    notes = [f"exit code {out['exitCode']}"]
    if out["timedOut"]:
        notes.append("timed out")
    if out["truncated"]:
        notes.append("output cut off")
    return [out["output"], f"[{', '.join(notes)}]"]


def terminate_process(out: ProcessStatus) -> Blocks:
    return [_process_state(out)]


def list_processes(out: ProcessList) -> Blocks:
    return ["\n".join(f"{_process_state(p)}: {' '.join(p.get('argv') or [])}" for p in out["processes"])]


# Each takes its tool's own result type: the table's values are called with the result of the
# tool they are filed under (workspace_tools.py), which no single parameter type describes.
TEXT: dict[str, Callable[[Any], Blocks]] = {
    "read_file": read_file,
    "read_multiple_files": read_multiple_files,
    "list_directory": list_directory,
    "get_file_info": get_file_info,
    "start_search": search_page,
    "get_more_search_results": search_page,
    "stop_search": stop_search,
    "list_searches": list_searches,
    "get_config": get_config,
    "write_file": write_file,
    "edit_block": edit_block,
    "create_directory": create_directory,
    "move_file": move_file,
    "start_process": process_output,
    "read_process_output": process_output,
    "interact_with_process": process_output,
    "terminate_process": terminate_process,
    "list_processes": list_processes,
    "run_command": run_command,
}

"""The structured results of the workspace's tools, as the Workspace builds them: one TypedDict per
tool output, the fields of each tool's outputSchema (workspace_tools.py). workspace_text.py reads
them to say the result as text."""

from __future__ import annotations

from typing import NotRequired, TypedDict, final

from llmc_cli.model import JSONObject


@final
class ReadResult(TypedDict):
    path: str
    content: str
    offset: int
    lines: int
    totalLines: int
    size: int
    truncated: bool
    nextOffset: NotRequired[int]


@final
class ReadError(TypedDict):
    path: str
    error: str


class ReadManyResult(TypedDict):
    files: list[ReadResult | ReadError]


class Entry(TypedDict):
    name: str
    type: str
    size: int
    modified: str


class Listing(TypedDict):
    path: str
    entries: list[Entry]
    truncated: bool


class FileInfo(TypedDict):
    path: str
    type: str
    size: int
    modified: str
    accessed: str
    changed: str
    permissions: str
    links: int


class WriteResult(TypedDict):
    path: str
    mode: str
    bytesWritten: int
    created: bool


class EditResult(TypedDict):
    path: str
    replacements: int


class CreateResult(TypedDict):
    path: str
    created: bool


class MoveResult(TypedDict):
    source: str
    destination: str


class SearchStatus(TypedDict):
    searchId: str
    kind: str
    pattern: str
    path: str
    done: bool
    resultCount: int
    elapsedMs: int
    stoppedBy: NotRequired[str]


class SearchPage(SearchStatus):
    offset: int
    results: list[JSONObject]
    totalResults: int
    nextOffset: NotRequired[int]


class SearchList(TypedDict):
    searches: list[SearchStatus]


class ProcessStatus(TypedDict):
    handle: str
    argv: list[str]
    pid: int
    running: bool
    exitCode: int | None
    outputBytes: int
    startedAt: str
    endedBy: NotRequired[str]


class ProcessOutput(ProcessStatus):
    offset: int
    output: str
    nextOffset: int


class CommandResult(ProcessStatus):
    output: str
    timedOut: bool
    truncated: bool


class ProcessList(TypedDict):
    processes: list[ProcessStatus]

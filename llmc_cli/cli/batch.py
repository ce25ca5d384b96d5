"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import cli, policy, services
from llmc_cli.cli.arguments import read_input
from llmc_cli.cli.output import emit_lines, note
from llmc_cli.cli.starting import start_servers
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, SkippedAfterFailure, UsageError
from llmc_cli.model import JSON, MAX_ARGUMENT_DEPTH, JSONObject, collector_paused, parse_json
from llmc_cli.model import _orjson as _orjson

if TYPE_CHECKING:
    from llmc_cli.services import BatchItem


# One non-empty line of a batch as read: its position among them, its id, and its tool name and
# arguments, or the error that makes its result. A plain tuple (a thousand of them are cheap), not
# yet the batch's item: reading the input loads none of services' call machinery, so the first
# server starts before it loads (tests/cli/test_early_start.py).
Line = tuple[int, JSON, str, JSONObject | None, LlmcError | None]


def read_lines(lines: list[str], loads: Callable[[str], Any] | None = None) -> list[Line]:
    """Every non-empty line, read; a line that cannot be read carries its error. `loads`: a
    parser whose value is json's for these lines (fast_loads), tried first: anything it refuses,
    and a line that might nest too deep, is read by parse_json (its value, or its error)."""
    read: list[Line] = []
    index = 0
    for line in lines:
        if not line or line.isspace():  # (not line.strip(), without the stripped copy)
            continue
        ident: JSON = None
        try:
            entry: JSON = _UNREAD
            # nested deeper than the arguments may be only with more brackets than that: a
            # short line has too few to count (parse_json's test)
            if loads is not None and (len(line) <= _DEEPEST or line.count("[") + line.count("{") <= _DEEPEST):
                try:
                    entry = loads(line)
                except ValueError:  # (orjson's JSONDecodeError) NaN, a lone surrogate, 1e400, or no JSON: json decides
                    pass
            if entry is _UNREAD:
                try:  # (load_json's message, without its call a line)
                    entry = parse_json(line, _DEEPEST)  # the line wraps the arguments
                except ValueError as exc:
                    raise UsageError(f"invalid line: {exc}") from None
            if type(entry) is not dict:  # (JSON's values are exactly their types: no isinstance)
                raise UsageError("a batch line must be a JSON object")
            ident = entry.get("id")
            tool, arguments = entry.get("tool"), entry.get("arguments", {})
            if type(tool) is not str or not tool:
                raise UsageError('a batch line needs "tool": "server.tool"')
            if type(arguments) is not dict:  # nested at most MAX_ARGUMENT_DEPTH: the line is checked one deeper
                raise UsageError('"arguments" must be a JSON object')
            read.append((index, ident, tool, arguments, None))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            read.append((index, ident, "", None, exc))
        index += 1
    return read


_DEEPEST = MAX_ARGUMENT_DEPTH + 1  # a line's nesting: its arguments' one level down
_UNREAD: Any = object()
# A batch this long takes up orjson anyway (model.py: its encodings do after 64): its lines too
FAST_LINES = 64
_NINETEEN_ZEROS = b"0" * 19


def fast_loads(text: str, lines: int) -> Callable[[str], Any] | None:
    """orjson's loads for the `lines` lines of `text` (half the instructions of json's a line),
    where its value is json's: for a long batch, with orjson installed (the `fast` extra), and
    unless the text has 19 digits in a row somewhere (orjson reads an integer past 64 bits as a
    float: mcp/jsonrpc.py decode's test, once for the whole text). What it refuses (NaN,
    Infinity, 1e400, a lone surrogate's escape) json reads or refuses (read_lines). None: json."""
    if lines < FAST_LINES:
        return None
    if text.encode("utf-8", "surrogatepass").translate(_DIGITS_TO_ZERO).find(_NINETEEN_ZEROS) >= 0:
        return None
    found = _orjson(False)  # model's one import of orjson (where its encoders take it up)
    return None if found is None else found[3]  # type: ignore[return-value]  # (orjson's loads reads str too)


_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


def items_of(lines: list[Line]) -> list[BatchItem]:
    """The batch's items: each line's tool name and arguments, or the error that makes its result."""
    return services.BatchItem.many(lines)


def first_server(lines: list[Line]) -> str | None:
    """The server the batch's first call names (SERVER.TOOL), which starts first."""
    if not lines or lines[0][4] is not None or "." not in lines[0][2]:
        return None
    return lines[0][2].partition(".")[0]


def run(
    ctx: click.Context,
    source: str,
    parallel: int,
    fail_fast: bool,
    yes: bool,
    validate: bool,
    target: Target,
    *,
    use_cache: bool = True,
) -> None:

    # The whole input first: a file that cannot be read, or is not UTF-8, starts no server.
    text = read_input(source, "--batch")
    split = text.splitlines()
    lines = read_lines(split, fast_loads(text, len(split)))
    # Only the servers the batch names start: the first call's first of all, before the catalog
    # over them and the pipeline load (cli/__init__.py).
    first = first_server(lines)
    started = start_servers(ctx, target, warm=False, first=first, calling=lines[0][2] if lines else None)
    # cli/common.py's modules (the catalog's, the profile's), the batch runner's and the
    # pipeline's load with the catalog, the items and the calls: bounded work that makes
    # long-lived objects, with the collector paused (its passes over them: ~1.5 M instructions
    # of a 1-call batch, issue 34).
    with collector_paused():
        catalog, profile = cli.open_target(ctx, target, warm=False, first=first, started=started)
        items = items_of(lines)
    worst: int = ExitCode.OK
    # What the summary counts, not every item kept to the end: how many were handed out, and
    # those that did not go well (an ok item's status is "ok": exit 0, no error)
    handed = 0
    not_ok: list[Any] = []
    write, flush = emit_lines()  # flushed whenever the batch waits for its next result, and at the end

    def done(item: Any) -> None:
        nonlocal worst, handed
        error = item.error
        if error is None:  # item.exit_code's, without the property's call (most lines)
            result = item.result
            code = ExitCode.TOOL_ERROR if result is not None and result.is_error else 0
        else:
            code = error.exit_code
            if isinstance(error, SkippedAfterFailure):
                error.message = f"{error.message} (--fail-fast)"
            else:
                policy.with_hint(error)
        if code > worst:  # max()'s, without its call (~700 instructions a line)
            worst = code
        if code:
            not_ok.append(item)
        handed += 1
        write(item.to_json())  # after the progress line is cleared

    with catalog:
        # The batch file is the person's decision (no confirm_destructive); the profile's
        # `confirm` patterns still apply, and a batch never asks: --yes or pre-approved hashes.
        with collector_paused():
            calls = cli.command_calls(ctx, catalog, profile, "batch", ask=False, yes=yes, use_cache=use_cache)
        try:
            try:
                services.run_batch(
                    calls, items, parallel=parallel, fail_fast=fail_fast, validate=validate, on_done=done, on_wait=flush
                )
            finally:
                flush()
        except BaseException:  # Ctrl-C, a signal: what finished and what did not, then the interruption
            note(summary(not_ok, handed, len(items)))
            raise
    if worst:
        note(summary(not_ok, handed, len(items)))
        ctx.exit(worst)


def summary(not_ok: list[Any], finished: int, total: int) -> str:
    """The one line ending a batch that did not all go well: `7 calls: 5 ok, 1 denied, 1 failed`
    (ok always; denied, failed, skipped and interrupted when there are any). `not_ok`: the
    finished items whose exit code is not 0 (every other one of the `finished` is ok)."""
    counts = {"ok": finished - len(not_ok), "denied": 0, "failed": 0, "skipped": 0}
    for item in not_ok:
        counts[item.status] += 1
    counts["interrupted"] = total - finished
    parts = [f"{n} {what}" for what, n in counts.items() if n or what == "ok"]
    return f"llmc: {total} call{'s' if total != 1 else ''}: {', '.join(parts)}"

"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.arguments import read_input
from llmc_cli.cli.common import command_calls, open_target
from llmc_cli.cli.lines import emit_lines
from llmc_cli.cli.output import note
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, SkippedAfterFailure, UsageError
from llmc_cli.model import JSON, MAX_ARGUMENT_DEPTH, JSONObject, parse_json
from llmc_cli.policy.approval import with_hint

if TYPE_CHECKING:
    from llmc_cli.services import BatchItem


# One non-empty line of a batch as read: its position among them, its id, and its tool name and
# arguments, or the error that makes its result. A plain tuple (a thousand of them are cheap), not
# yet the batch's item: reading the input loads none of services' call machinery, so the first
# server starts before it loads (tests/cli/test_early_start.py).
Line = tuple[int, JSON, str, JSONObject | None, LlmcError | None]


def read_lines(lines: Iterable[str]) -> list[Line]:
    """Every non-empty line, read; a line that cannot be read carries its error."""
    read: list[Line] = []
    for index, line in enumerate(line for line in lines if line.strip()):
        ident: JSON = None
        try:
            try:  # (load_json's message, without its call a line)
                entry = parse_json(line, MAX_ARGUMENT_DEPTH + 1)  # the line wraps the arguments
            except ValueError as exc:
                raise UsageError(f"invalid line: {exc}") from None
            if not isinstance(entry, dict):
                raise UsageError("a batch line must be a JSON object")
            ident = entry.get("id")
            tool, arguments = entry.get("tool"), entry.get("arguments", {})
            if not isinstance(tool, str) or not tool:
                raise UsageError('a batch line needs "tool": "server.tool"')
            if not isinstance(arguments, dict):  # nested at most MAX_ARGUMENT_DEPTH: the line is checked one deeper
                raise UsageError('"arguments" must be a JSON object')
            read.append((index, ident, tool, arguments, None))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            read.append((index, ident, "", None, exc))
    return read


def items_of(lines: list[Line]) -> list[BatchItem]:
    """The batch's items: each line's request, or the error that makes its result."""
    item, request = services.BatchItem, services.ToolRequest
    return [
        item(index, ident, error=error) if error is not None else item(index, ident, request(tool, arguments))
        for index, ident, tool, arguments, error in lines
    ]


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
    lines = read_lines(read_input(source, "--batch").splitlines())
    # Only the servers the batch names start: the first call's first of all.
    catalog, profile = open_target(ctx, target, warm=False, first=first_server(lines), calling=lines[0][2] if lines else None)
    items = items_of(lines)
    worst: int = ExitCode.OK
    finished: list[Any] = []
    write, soon, flush = emit_lines()  # written as the calls finish (soon), the rest at the end

    def done(item: Any) -> None:
        nonlocal worst
        code = item.exit_code
        if code > worst:  # max()'s, without its call (~700 instructions a line)
            worst = code
        finished.append(item)
        if isinstance(item.error, SkippedAfterFailure):
            item.error.message = f"{item.error.message} (--fail-fast)"
        elif item.error is not None:
            with_hint(item.error)
        write(item.to_json())  # after the progress line is cleared

    with catalog:
        # The batch file is the person's decision (no confirm_destructive); the profile's
        # `confirm` patterns still apply, and a batch never asks: --yes or pre-approved hashes.
        calls = command_calls(ctx, catalog, profile, "batch", ask=False, yes=yes, use_cache=use_cache)
        try:
            try:
                services.run_batch(
                    calls, items, parallel=parallel, fail_fast=fail_fast, validate=validate, on_done=done, on_wait=soon
                )
            finally:
                flush()
        except BaseException:  # Ctrl-C, a signal: what finished and what did not, then the interruption
            note(summary(finished, len(items)))
            raise
    if worst:
        note(summary(finished, len(items)))
        ctx.exit(worst)


def summary(finished: list[Any], total: int) -> str:
    """The one line ending a batch that did not all go well: `7 calls: 5 ok, 1 denied, 1 failed`
    (ok always; denied, failed, skipped and interrupted when there are any)."""
    counts = {"ok": 0, "denied": 0, "failed": 0, "skipped": 0}
    for item in finished:
        counts[item.status] += 1
    counts["interrupted"] = total - len(finished)
    parts = [f"{n} {what}" for what, n in counts.items() if n or what == "ok"]
    return f"llmc: {total} call{'s' if total != 1 else ''}: {', '.join(parts)}"

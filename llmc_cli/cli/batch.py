"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.arguments import read_input
from llmc_cli.cli.common import command_calls, open_target
from llmc_cli.cli.output import emit_lines, note
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, SkippedAfterFailure, UsageError
from llmc_cli.model import JSON, MAX_ARGUMENT_DEPTH, parse_json
from llmc_cli.policy.approval import with_hint

if TYPE_CHECKING:
    from llmc_cli.services import BatchItem


def read_lines(lines: Iterable[str]) -> list[BatchItem]:
    """Every non-empty line, read, as the batch's item: its request, or the error that makes its
    result (made here, not from a tuple of the line made first: a line is a thousandth of a batch)."""
    item, request = services.BatchItem, services.ToolRequest
    read: list[BatchItem] = []
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
            read.append(item(index, ident, request(tool, arguments)))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            read.append(item(index, ident, error=exc))
    return read


def first_call(items: list[BatchItem]) -> str | None:
    """The tool (SERVER.TOOL, or a bare name) the batch's first line calls."""
    return items[0].request.name if items and items[0].request is not None else None


def first_server(items: list[BatchItem]) -> str | None:
    """The server the batch's first call names (SERVER.TOOL), which starts first."""
    name = first_call(items)
    return name.partition(".")[0] if name is not None and "." in name else None


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
    items = read_lines(read_input(source, "--batch").splitlines())
    # Only the servers the batch names start: the first call's first of all.
    catalog, profile = open_target(ctx, target, warm=False, first=first_server(items), calling=first_call(items))
    worst: int = ExitCode.OK
    finished: list[Any] = []
    write, flush = emit_lines()  # flushed whenever the batch waits for its next result, and at the end

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
                    calls, items, parallel=parallel, fail_fast=fail_fast, validate=validate, on_done=done, on_wait=flush
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

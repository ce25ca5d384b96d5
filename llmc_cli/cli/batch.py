"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.arguments import load_json, read_input
from llmc_cli.cli.common import command_calls, open_target
from llmc_cli.cli.output import emit, note
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, SkippedAfterFailure, UsageError
from llmc_cli.model import ARGUMENTS_TOO_DEEP, JSON, MAX_ARGUMENT_DEPTH, arguments_too_deep
from llmc_cli.policy.approval import with_hint
from llmc_cli.services import BatchItem, ToolRequest

if TYPE_CHECKING:
    from llmc_cli.services import BatchItem


def read_items(lines: Iterable[str]) -> list[BatchItem]:
    """Every line becomes an item with its request; a line that cannot be read, an error result."""

    items: list[BatchItem] = []
    for index, line in enumerate(line for line in lines if line.strip()):
        ident: JSON = None
        try:
            entry = load_json(line, "invalid line", MAX_ARGUMENT_DEPTH + 1)  # the line wraps the arguments
            if not isinstance(entry, dict):
                raise UsageError("a batch line must be a JSON object")
            ident = entry.get("id")
            tool, arguments = entry.get("tool"), entry.get("arguments", {})
            if not isinstance(tool, str) or not tool:
                raise UsageError('a batch line needs "tool": "server.tool"')
            if not isinstance(arguments, dict):
                raise UsageError('"arguments" must be a JSON object')
            if arguments_too_deep(arguments):
                raise UsageError(ARGUMENTS_TOO_DEEP)
            items.append(BatchItem(index, ident, request=ToolRequest(tool, arguments)))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            items.append(BatchItem(index, ident, error=exc))
    return items


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
    items = read_items(read_input(source, "--batch").splitlines())
    catalog, profile = open_target(ctx, target, warm=False)  # only the servers the batch names start
    worst: int = ExitCode.OK
    finished: list[Any] = []

    def done(item: Any) -> None:
        nonlocal worst
        worst = max(worst, item.exit_code)
        finished.append(item)
        if isinstance(item.error, SkippedAfterFailure):
            item.error.message = f"{item.error.message} (--fail-fast)"
        elif item.error is not None:
            with_hint(item.error)
        emit(item.to_json(), "jsonl")  # after the progress line is cleared

    with catalog:
        # The batch file is the person's decision (no confirm_destructive); the profile's
        # `confirm` patterns still apply, and a batch never asks: --yes or pre-approved hashes.
        calls = command_calls(ctx, catalog, profile, "batch", ask=False, yes=yes, use_cache=use_cache)
        try:
            services.run_batch(calls, items, parallel=parallel, fail_fast=fail_fast, validate=validate, on_done=done)
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

"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from llmc_cli.cli.arguments import load_json, read_input
from llmc_cli.cli.output import emit, note
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, UsageError
from llmc_cli.model import ARGUMENTS_TOO_DEEP, JSON, MAX_ARGUMENT_DEPTH, arguments_too_deep

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.services import BatchItem


def read_items(lines: Iterable[str], resolve: Callable[[str], tuple[str, str]]) -> list[BatchItem]:
    """Every line becomes an item; a line that cannot be read becomes an error result for it."""
    from llmc_cli.model import ToolCall
    from llmc_cli.services import BatchItem

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
            server, name = resolve(tool)
            items.append(BatchItem(index, ident, call=ToolCall(server, name, arguments)))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            items.append(BatchItem(index, ident, error=exc))
    return items


def check_arguments(catalog: Catalog, items: list[BatchItem]) -> None:
    """--validate: each call's arguments against its tool's inputSchema, before any decision, as
    `llmc call` checks them: a line that does not fit gets its error (exit 2) and does not run.
    The check runs here, not in a session keeper: its import is paid once for the whole batch."""
    from llmc_cli.mcp.validation import validate_arguments

    for item in items:
        if item.call is None:
            continue
        try:
            tool = catalog.find_tool(item.call.server, item.call.tool)
        except LlmcError:
            continue  # a server that cannot list its tools: the call itself reports it
        if tool is None:
            continue  # likewise "no tool named ..."
        try:
            validate_arguments(item.call.arguments, tool.input_schema, item.call.qualified_name)
        except UsageError as exc:
            exc.message = f"line {item.index + 1}: {exc.message}"
            item.error = exc


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
    from llmc_cli import services
    from llmc_cli.cli.common import open_target, tool_resolver

    # The whole input first: a file that cannot be read, or is not UTF-8, starts no server.
    lines = read_input(source, "--batch").splitlines()
    catalog, profile = open_target(ctx, target, warm=False)
    worst: int = ExitCode.OK
    with catalog:
        items = read_items(lines, tool_resolver(ctx, catalog, profile))  # one resolver: the cache is read once
        # Only the servers the batch names start, all at once.
        catalog.pool.warm_up(sorted({item.call.server for item in items if item.call is not None}))
        if validate:
            check_arguments(catalog, items)
        # The batch file is the person's decision (no confirm_destructive); the profile's
        # `confirm` patterns still apply, and a batch never prompts: --yes or pre-approved hashes.
        invocation = services.Invocation(
            profile=profile,
            state=services.open_state(profile),
            command="batch",
            caller="human",
            assume_yes=yes,
            use_cache=use_cache,
        )

        finished: list[Any] = []

        def done(item: Any) -> None:
            nonlocal worst
            worst = max(worst, item.exit_code)
            finished.append(item)
            emit(item.to_json(), "jsonl")  # after the progress line is cleared

        try:
            services.run_batch(catalog, invocation, items, parallel=parallel, fail_fast=fail_fast, on_done=done)
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

"""`llmc call --batch FILE|-`: JSON Lines in ({"id", "tool": "server.tool", "arguments"}), one
JSON Lines result per input out, in input order."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import click

from llmc_cli.cli.arguments import load_json, read_input
from llmc_cli.cli.output import json_line
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ExitCode, LlmcError, UsageError


def read_items(lines: Iterable[str], resolve: Callable[[str], tuple[str, str]]) -> list[Any]:
    """Every line becomes an item; a line that cannot be read becomes an error result for it."""
    from llmc_cli.services import BatchItem
    from llmc_cli.model import ToolCall

    items = []
    for index, line in enumerate(line for line in lines if line.strip()):
        ident: Any = None
        try:
            entry = load_json(line, "invalid line")
            if not isinstance(entry, dict):
                raise UsageError("a batch line must be a JSON object")
            ident = entry.get("id")
            tool, arguments = entry.get("tool"), entry.get("arguments", {})
            if not isinstance(tool, str) or not tool:
                raise UsageError("a batch line needs \"tool\": \"server.tool\"")
            if not isinstance(arguments, dict):
                raise UsageError("\"arguments\" must be a JSON object")
            server, name = resolve(tool)
            items.append(BatchItem(index, ident, call=ToolCall(server, name, arguments)))
        except LlmcError as exc:
            exc.message = f"line {index + 1}: {exc.message.removeprefix('invalid line: ')}"
            items.append(BatchItem(index, ident, error=exc))
    return items


def run(ctx: click.Context, source: str, parallel: int, fail_fast: bool, yes: bool, target: Target) -> None:
    from llmc_cli import services
    from llmc_cli.cli.common import open_catalog, resolve_tool

    # The whole input first: a file that cannot be read, or is not UTF-8, starts no server.
    lines = read_input(source, "--batch").splitlines()
    catalog, profile = open_catalog(ctx, target, warm=False)
    worst: int = ExitCode.OK
    with catalog:
        def resolve(tool: str) -> tuple[str, str]:
            return resolve_tool(ctx, catalog, tool)

        items = read_items(lines, resolve)
        # Only the servers the batch names start, all at once.
        catalog.warm_up(sorted({item.call.server for item in items if item.call is not None}))
        # The batch file is the person's decision (no confirm_destructive); the profile's
        # `confirm` patterns still apply, and a batch never prompts: --yes or pre-approved hashes.
        invocation = services.Invocation(profile=profile, command="batch", caller="human", assume_yes=yes)

        def done(item: Any) -> None:
            nonlocal worst
            worst = max(worst, item.exit_code)
            click.echo(json_line(item.to_json()))

        services.run_batch(catalog, invocation, items, parallel=parallel, fail_fast=fail_fast, on_done=done)
    if worst:
        ctx.exit(worst)

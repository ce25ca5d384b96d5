"""`llmc call SERVER.TOOL key=value ...`: one tool call, its CallToolResult as JSON."""

from __future__ import annotations

import click

from llmc_cli import cli, services
from llmc_cli.cli.arguments import parse_json_option, parse_pairs
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import emit, format_option, note, plain_text
from llmc_cli.cli.starting import start_servers
from llmc_cli.cli.targets import Target, shell_complete_tools, target_options
from llmc_cli.errors import ToolFailed, UsageError


@click.command()
@click.argument("tool", required=False, shell_complete=shell_complete_tools)
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE | KEY:=JSON]...")
@click.option("--json", "json_args", metavar="'{...}'|@FILE|-", help="All arguments as one JSON object.")
@click.option("--text", is_flag=True, help="Print only the text content.")
@click.option("--yes", "-y", is_flag=True, help="Answer yes to the confirmations the profile's `confirm` patterns ask for.")
@format_option("json", "table")
@click.option(
    "--batch",
    "batch",
    metavar="FILE|-",
    help='Many calls, one connection per server: JSON Lines {"id", "tool", "arguments"} in, '
    "one JSON Lines result per input out, in input order.",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="With --batch: consecutive read-only calls to one server run this many at once.",
)
@click.option("--fail-fast", is_flag=True, help="With --batch: skip the rest after the first failure.")
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="Ask the server even when [cache] holds a fresh result of this call (and cache its answer).",
)
@click.option(
    "--validate/--no-validate",
    default=True,
    show_default=True,
    help="Check the arguments against the tool's inputSchema before calling (exit 2 when they do not fit).",
)
@target_options
@click.pass_context
def call(
    ctx: click.Context,
    tool: str | None,
    pairs: tuple[str, ...],
    json_args: str | None,
    text: bool,
    yes: bool,
    fmt: str,
    batch: str | None,
    parallel: int,
    fail_fast: bool,
    no_cache: bool,
    validate: bool,
    target: Target,
) -> None:
    """Call one tool. TOOL is SERVER.TOOL, or a bare name when exactly one server has it.

    Values are typed by the tool's inputSchema (integers, numbers, booleans, JSON for objects
    and arrays); KEY:=JSON passes raw JSON. Exit 1 when the tool reports an error. With
    --batch, the exit code is the worst of all calls.
    """

    if batch:
        if tool or pairs or json_args or text:
            raise UsageError("--batch reads every call from its file: give no TOOL, arguments, --json or --text")
        from llmc_cli.cli.batch import run

        run(ctx, batch, parallel, fail_fast, yes, validate, target, use_cache=not no_cache)
        return
    if tool is None:
        raise UsageError("name the TOOL to call (or use --batch FILE)")
    if json_args and pairs:
        raise UsageError("give arguments either as KEY=VALUE pairs or with --json, not both")
    # Bad input is found before any server starts.
    arguments = parse_json_option(json_args) if json_args else None
    named = tool.partition(".")[0] if "." in tool else None  # SERVER.TOOL (or a bare name with a dot)
    # Its server starts first, then the catalog over it and the pipeline load (cli/__init__.py).
    started = start_servers(ctx, target, warm=False, first=named, calling=tool)
    catalog, profile = cli.open_target(ctx, target, warm=False, first=named, started=started)
    request = services.ToolRequest(tool, arguments, typed=lambda schema: parse_pairs(pairs, schema), validate=validate)
    with catalog:
        calls = cli.command_calls(ctx, catalog, profile, "call", yes=yes, use_cache=not no_cache)
        outcome = calls.run(request)
    result, server, name = outcome.tool_result, outcome.tool_call.server, outcome.tool_call.tool
    dropped = getattr(calls.context.state.results, "dropped", None)
    if dropped and app_of(ctx).verbose:
        note(f"cache: the entry for {server}.{name} was dropped ({dropped}); the server was asked")
    if text:
        plain_text(result.text)
    else:
        emit(
            {
                "server": server,
                "tool": name,
                **result.to_json(),
                **({"cached": True} if result.cached else {}),
                "durationMs": result.duration_ms,
                **cli.warnings(ctx),
            },
            fmt,
        )
    if result.is_error:
        raise ToolFailed(f"{server}.{name} reported an error: {result.text[:200]}")

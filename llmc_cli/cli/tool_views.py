"""`llmc tools search`, `show` and `scan`: find a tool, read one, look for attacks in what
servers tell the model (loaded when one runs: cli/tools.py TOOLS)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from llmc_cli import policy, services
from llmc_cli.cli.common import open_target, tool_resolver
from llmc_cli.cli.output import FORMATS, clean, emit, emit_listing, format_option, raise_failures
from llmc_cli.cli.targets import Target, shell_complete_tools, target_options
from llmc_cli.errors import ToolFailed, UsageError
from llmc_cli.guard.clearance import human
from llmc_cli.model import ToolCall

if TYPE_CHECKING:
    from llmc_cli.policy import Decision


@click.command("search")
@click.argument("query")
@click.option("-n", "--limit", type=click.IntRange(1, 1000), default=5, show_default=True, help="At most this many tools.")
@click.option(
    "--explain",
    is_flag=True,
    help='Say why each tool ranked: the terms it matched, in which fields, and what each added to its score ("why").',
)
@click.option(
    "--semantic/--no-semantic",
    default=None,
    help="Fuse a local embedding model's ranking with the lexical one, or not (default: the profile's "
    "[search] semantic, else not; needs the extra llmc-cli[semantic]). Tool vectors are cached in the "
    "state directory.",
)
@format_option(*FORMATS, listing=True)
@target_options
@click.pass_context
def search(ctx: click.Context, query: str, limit: int, explain: bool, semantic: bool | None, fmt: str, target: Target) -> None:
    """The tools that best fit QUERY, a request in words, best first: {"tools": [{score, server,
    tool, title, description}], "errors": [...]}. Ranked offline (BM25 over names, titles,
    descriptions, arguments and their allowed values; no model, no network) among the tools the
    profile's policy lets a model see, less those drifted from its lock file. A tool sharing no
    word with QUERY is not listed. With the semantic stage ([search] semantic = true, --semantic;
    the extra llmc-cli[semantic]) a small local embedding model ranks them by meaning too and the
    two rankings are fused by reciprocal rank (score: the fused score; a tool may then be listed
    that shares no word with QUERY). With
    --explain each row also has "why": {terms: [{term, query_word, synonym, score, idf, fields:
    {field: score}, boilerplate?}], length, semantic?: {rank, similarity}, lexical_rank?}; on a
    terminal, a few lines per tool."""
    if not query.strip():
        raise UsageError("the query is empty: say in words what the tool should do")
    catalog, profile = open_target(ctx, target)
    with catalog:  # closed (its servers stopped) on the way out of an error too
        fused = services.semantic_wanted(semantic if semantic is not None else profile.profile.search.semantic)
        found, failures = services.searchable_tools(catalog, profile, list(target.servers) or None, human(profile.profile))
    matches = services.search_index(found, fused).search(query, limit, explain=explain)
    rows = [m.to_json() for m in matches]
    if explain and fmt == "table":
        from llmc_cli.cli.search_explain import explain_text

        if matches:
            click.echo(explain_text(matches))
        else:
            emit_listing("tools", [], "table", [f.to_json() for f in failures])
    else:
        people = [
            {"score": f"{m.score:.2f}", "server": m.tool.server, "tool": m.tool.name, "description": m.tool.description}
            for m in matches
        ]
        emit_listing("tools", rows, fmt, [f.to_json() for f in failures], table_rows=people)
    raise_failures(failures, len(catalog.specs))


@click.command("show")
@click.argument("tool", shell_complete=shell_complete_tools)
@format_option("json", "table", help="json: one document; table: a page for people.")
@target_options
@click.pass_context
def show(ctx: click.Context, tool: str, fmt: str, target: Target) -> None:
    """One tool: description, arguments (name, type, required, default, allowed values), output
    schema, annotations, what the profile's policy decides for a call of it by you (`llmc
    call`) and by a model (`ask`), and an example `llmc call` line. TOOL is SERVER.TOOL, or a
    bare name when one server has it. Starts only the server that has the tool."""
    from llmc_cli.cli.tool_info import arguments, example_call, readable

    catalog, profile = open_target(ctx, target, warm=False)
    with catalog:
        server, name = tool_resolver(ctx, catalog, profile)(tool)
        found = catalog.require_tool(server, name)
        cwd = catalog.pool.working_directory(server)
    config = profile.profile.policy
    call = ToolCall(server, name, {})  # no arguments: what the tool alone decides (argument rules judge defaults)
    rows = arguments(found.input_schema)
    info = {
        "server": server,
        "tool": name,
        "title": found.title,
        "description": found.description,
        "arguments": rows,
        "inputSchema": found.input_schema,
        "outputSchema": found.output_schema,
        "annotations": found.annotations,
        "hints": policy.effective_hints(found, call.qualified_name, config),
        "policy": {
            caller: _decision(policy.decide(call, found, config, caller=caller, cwd=cwd)) for caller in ("human", "model")
        },
        "example": example_call(call.qualified_name, rows),
    }
    if fmt == "json":
        emit(info)
    else:
        click.echo(clean(readable(info)))


def _decision(decision: Decision) -> dict[str, Any]:
    """A decision without its call hash: the hash is of a call with no arguments, which is not
    the call anyone would approve."""
    return {k: v for k, v in decision.to_json().items() if k != "callHash"}


@click.command("scan")
@format_option(*FORMATS, listing=True)
@target_options
@click.pass_context
def scan(ctx: click.Context, fmt: str, target: Target) -> None:
    """Look for attacks in what servers tell the model: every tool's name, title, description,
    argument descriptions, defaults, enums and output schema, and each server's instructions
    (README "Guardrails": the rules). One finding per server, tool, field and rule (JSON); exit
    1 when any is high."""
    catalog, profile = open_target(ctx, target)
    with catalog:
        findings, failures = services.scan_servers(catalog, profile, list(target.servers) or None, human(profile.profile))
    emit_listing(
        "findings",
        [f.to_json() for f in findings],
        fmt,
        [f.to_json() for f in failures],
        columns=["server", "tool", "field", "rule", "severity", "excerpt"],
    )
    raise_failures(failures, len(catalog.specs))
    high = [f for f in findings if f.severity == "high"]
    if high:
        raise ToolFailed(f"{len(high)} high-severity finding(s) in server metadata")

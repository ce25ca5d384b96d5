"""`llmc tools ...`: the tools of every server, as MCP sent them or translated for a provider."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import policy, services
from llmc_cli.cli.common import open_target, tool_resolver
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, clean, emit, emit_listing, format_option, note, plain_text, raise_failures, warn
from llmc_cli.cli.targets import LocalPath, Target, shell_complete_tools, target_options
from llmc_cli.config.profiles import load_profile, lock_path
from llmc_cli.errors import DriftError, ToolFailed, UsageError
from llmc_cli.guard.clearance import human
from llmc_cli.model import LINT_FORMATS, TOOL_FORMATS, Tool, ToolCall
from llmc_cli.services.sandbox import describe
from llmc_cli.services.tools import profile_key, remember_tools

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.policy import Decision
    from llmc_cli.translate import Translation

STRICT = click.option(
    "--strict", is_flag=True, help="OpenAI strict-mode schemas; any loss or rewrite fails the command (exit 1)."
)


@click.group()
def tools() -> None:
    """List, translate, export, lint and pin tool manifests."""


@tools.command("list")
@format_option(
    *FORMATS,
    *TOOL_FORMATS,
    listing=True,
    help="A listing (default: a table on a terminal, else JSON; LLMC_FORMAT, [output] format), "
    "or the tools translated for a provider's API.",
)
@STRICT
@click.option("--all", "show_all", is_flag=True, help='Also the tools the profile\'s policy denies, marked "denied".')
@click.option(
    "--match",
    "globs",
    multiple=True,
    metavar="GLOB",
    help="Only tools whose name or SERVER.TOOL matches this glob (repeatable: any of them).",
)
@click.option(
    "--defer-loading",
    is_flag=True,
    help="With --format anthropic: every tool with defer_loading, after Anthropic's server-side "
    "tool search tool (BM25; needs the advanced-tool-use-2025-11-20 beta).",
)
@target_options
@click.pass_context
def list_(
    ctx: click.Context, fmt: str, strict: bool, show_all: bool, globs: tuple[str, ...], defer_loading: bool, target: Target
) -> None:
    """The tools of every server (or -s ones), exactly as each server sent them, each with a
    "server" key: {"tools": [...], "errors": [...]}.

    A server that cannot be reached is reported on stderr and in the output; the others' tools
    are still printed, and the exit code is 5 (or, when every server failed the same way, that
    error's own code).
    """
    if defer_loading and fmt != "anthropic":
        raise UsageError("--defer-loading is Anthropic's tool search: use it with --format anthropic")
    catalog, profile = open_target(ctx, target)
    if app_of(ctx).verbose:
        for spec in catalog.specs.values():
            if spec.kind == "stdio":
                note(f"llmc: {spec.name} runs {describe(spec.sandbox, bool(spec.launch))}")
    # The listing is written before the catalog closes: a stdio server that does not exit on
    # EOF holds the close for the grace and a SIGTERM (~60 ms), which the reader (a terminal,
    # jq) need not wait for. The process still ends only once its servers have.
    with catalog:
        found, denied, failures = services.visible_tools(
            catalog, profile, list(target.servers) or None, human(profile.profile), closed=show_all
        )
        if show_all:
            found = found + denied
        if not target.is_adhoc:  # for shell completion of tool names
            listed = [s for s in catalog.specs if s not in {f.server for f in failures}]
            remember_tools(profile_key(app_of(ctx).profile), [t.qualified_name for t in found], listed)
        if globs:
            found = [t for t in found if _matches(t, globs)]
        if fmt in TOOL_FORMATS:
            if show_all:
                raise UsageError("--all lists denied tools; a translation holds only the tools the profile allows")
            _print_translation(found, fmt, strict, defer_loading)
            raise_failures(failures, len(catalog.specs))
            return
        rows = [{"server": t.server, **t.raw, **({"denied": True} if t in denied else {})} for t in found]
        people = [
            {
                "server": t.server,
                "tool": t.name,
                **({"denied": "yes" if t in denied else ""} if show_all else {}),
                "description": t.description,
            }
            for t in found
        ]
        emit_listing(
            "tools",
            rows,
            fmt,
            [f.to_json() for f in failures],
            table_rows=people,
            columns=["server", "tool", *(["denied"] if show_all else []), "description"],
        )
        raise_failures(failures, len(catalog.specs))


@tools.command("search")
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


@tools.command("show")
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


def _matches(tool: Tool, globs: tuple[str, ...]) -> bool:

    return any(fnmatchcase(tool.name, g) or fnmatchcase(tool.qualified_name, g) for g in globs)


def _translate(found: list[Tool], fmt: str, strict: bool) -> Translation:
    """Translate, print every warning on stderr; with --strict a warning is a failure (exit 1)."""
    from llmc_cli.translate import translate

    result = translate(found, fmt, strict=strict)
    for line in grouped_warnings(result.warnings):
        warn(line)
    return result


def grouped_warnings(findings: list[Any]) -> list[str]:
    """One line per kind of finding (what happened, why, for which target) naming every tool
    and place it happened, instead of one line per tool: forty tools losing `format` is one fact."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for f in findings:
        groups.setdefault((f.target, f.what, f.why), []).append(f.tool)
    return [
        f"{target}: {what} ({why}): {len(tools)} place(s) in {', '.join(dict.fromkeys(tools))}"
        for (target, what, why), tools in groups.items()
    ]


def _fail_on_warnings(result: Translation, strict: bool) -> None:
    if strict and result.warnings:
        raise ToolFailed(f"{len(result.warnings)} translation warning(s) with --strict")


def _print_translation(found: list[Tool], fmt: str, strict: bool, defer_loading: bool = False) -> None:
    result = _translate(found, fmt, strict)
    if isinstance(result.definitions, str):
        plain_text(result.definitions)  # a prompt for a model: cleaned only on a terminal
    elif defer_loading:
        from llmc_cli.translate.anthropic import deferred

        emit(deferred(result.definitions))
    else:
        emit(result.definitions)
    _fail_on_warnings(result, strict)


def _profile_lock(profile: LoadedProfile) -> str:
    """The lock file `call` checks: the profile's `lock`, relative to the profile; else llmc.lock."""

    return lock_path(profile) if profile.profile.lock else "llmc.lock"


def _allowed_tools(ctx: click.Context, target: Target, hidden: bool = False) -> tuple[list[Any], list[Any], Any, Any, Any]:
    """(tools, failures, catalog, server infos, profile); with `hidden`, the tools [guard]
    descriptions = "hide" keeps from models too (the lock pins them, verdict and all)."""
    catalog, profile = open_target(ctx, target)
    with catalog:
        found, denied, failures = services.visible_tools(catalog, profile, list(target.servers) or None, human(profile.profile))
        if hidden:
            found += [t for t in denied if policy.visible(t, profile.profile.policy).action == "allow"]
        usable = services.usable_servers(catalog, profile, list(target.servers) or None, human(profile.profile))
        failed = {f.server for f in failures}
        infos = {
            name: catalog.session(name).server_info
            for name in (catalog.specs if usable is None else usable)
            if name not in failed
        }
    return found, failures, catalog, infos, profile


@tools.command("export")
@format_option(*TOOL_FORMATS, required=True)
@click.option(
    "-o", "--output", type=LocalPath(dir_okay=False, allow_dash=True), required=True, help="File to write; - for stdout."
)
@STRICT
@target_options
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str, strict: bool, target: Target) -> None:
    """Translate the manifest for a provider and write it to a file (atomically), or with -o -
    to stdout."""
    from llmc_cli.lockfile import write

    found, failures, catalog, _, _ = _allowed_tools(ctx, target)
    result = _translate(found, fmt, strict)
    _fail_on_warnings(result, strict)
    raise_failures(failures, len(catalog.specs))
    definitions = result.definitions
    if isinstance(definitions, str):
        definitions = {"text": definitions}
    if output == "-":  # the translation itself is the output: no summary beside it
        emit(definitions)
        return
    write(output, definitions)  # same atomic JSON writer as lock files
    # "warnings" as in every output: the notices themselves (the lines stderr showed), not a count
    emit({"file": output, "format": fmt, "toolCount": len(found), "warnings": grouped_warnings(result.warnings)})


@tools.command("lint")
@click.option(
    "--provider",
    "providers",
    multiple=True,
    type=click.Choice(LINT_FORMATS),
    help="Only these providers (repeatable; default: all).",
)
@STRICT
@format_option(*FORMATS, listing=True)
@target_options
@click.pass_context
def lint(ctx: click.Context, providers: tuple[str, ...], strict: bool, fmt: str, target: Target) -> None:
    """What each provider would reject or lose, and why, and which path-like arguments of tools
    under a [policy.args] rule no rule covers (target "policy") (JSON). --strict: exit 1 on any
    finding."""
    from llmc_cli import translate
    from llmc_cli.services import caching

    found, failures, catalog, _, profile = _allowed_tools(ctx, target)
    findings = translate.lint(found, providers or LINT_FORMATS, strict=strict)
    findings += [
        translate.Finding(
            tool.qualified_name,
            f"$.inputSchema.properties.{arg}",
            "path-like argument that no [policy.args] rule covers",
            why,
            "policy",
        )
        for tool in found
        for arg, why in policy.uncovered_path_arguments(tool, profile.profile.policy)
    ]
    findings += [
        translate.Finding(
            tool.qualified_name,
            "$.annotations.readOnlyHint",
            "listed in [cache] tools but not read-only: never cached",
            "only tools read-only by their annotations and [policy.hints] "
            "are cached (a destructive or unannotated tool's calls are never answered from the cache)",
            "cache",
        )
        for tool in found
        if not caching.cacheable(tool, tool.qualified_name, profile.profile)
        and caching.verdict(tool, tool.qualified_name, profile.profile) is not None
    ]
    emit_listing(
        "findings",
        [f.to_json() for f in findings],
        fmt,
        [f.to_json() for f in failures],
        columns=["server", "tool", "target", "path", "what", "why"],
    )
    raise_failures(failures, len(catalog.specs))
    if strict and findings:
        raise ToolFailed(f"{len(findings)} portability finding(s)")


@tools.command("scan")
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


@tools.command("lock")
@click.option(
    "-o",
    "--output",
    type=LocalPath(dir_okay=False),
    help="Lock file to write. Default: the profile's `lock` (relative to the profile), else llmc.lock.",
)
@target_options
@click.pass_context
def lock(ctx: click.Context, output: str | None, target: Target) -> None:
    """Pin every tool the policy allows (hash of name, description, schemas, annotations; the
    scan's verdict on them; server name and version)."""
    from llmc_cli import lockfile
    from llmc_cli.guard.scan import tool_verdict

    found, failures, catalog, infos, profile = _allowed_tools(ctx, target, hidden=True)
    output = output or _profile_lock(profile)
    raise_failures(failures, len(catalog.specs))  # never pin a partial manifest
    lockfile.write(output, lockfile.build(found, infos, tool_verdict))
    # counts are NOUNCount: "tools" and "servers" are lists of them in every other output
    emit({"file": output, "serverCount": len(infos), "toolCount": len(found)})


@tools.command("diff")
@click.option(
    "--lock",
    "lock_path",
    type=LocalPath(dir_okay=False),
    help="Lock file to compare with. Default: the profile's `lock` (relative to the profile), else llmc.lock.",
)
@target_options
@click.pass_context
def diff(ctx: click.Context, lock_path: str | None, target: Target) -> None:
    """What was added, removed or changed since the lock (changed descriptions shown in full).
    Exit 10 on drift."""
    from llmc_cli import lockfile

    lock_path = lock_path or _profile_lock(load_profile(app_of(ctx).profile))
    pinned = lockfile.read(lock_path)
    from llmc_cli.guard.scan import tool_verdict

    found, failures, catalog, infos, _ = _allowed_tools(ctx, target, hidden=True)
    report = lockfile.diff(pinned, found, list(infos), tool_verdict)
    emit(report)
    raise_failures(failures, len(catalog.specs))
    if report["drift"]:
        raise DriftError(
            f"tools drifted from {lock_path}: {len(report['added'])} added, "
            f"{len(report['removed'])} removed, {len(report['changed'])} changed"
        )

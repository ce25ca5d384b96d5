"""`llmc resources list|read`, `llmc prompts list|get`, `llmc ping`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.arguments import parse_pairs
from llmc_cli.cli.common import command_calls, open_target
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note, raise_failures
from llmc_cli.cli.targets import Target, target_options
from llmc_cli.errors import LlmcError, UsageError, did_you_mean
from llmc_cli.guard.clearance import human

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog

FORMAT = format_option(*FORMATS, listing=True)


# A listing's columns for people (what the server sent stays in JSON).
COLUMNS = {
    "resources": ["server", "name", "uri", "mimeType", "description"],
    "resourceTemplates": ["server", "name", "uriTemplate", "mimeType", "description"],
    "prompts": ["server", "name", "arguments", "description"],
}


def _gather(ctx: click.Context, target: Target, fmt: str, method: str, key: str, capability: str) -> None:
    """A listing across servers, without what the profile's policy denies; a server without the
    capability is skipped, not failed."""
    catalog, profile = open_target(ctx, target, warm=False)  # a server the policy denies whole never starts
    with catalog:
        per_server, skipped, failures = services.visible_offered(catalog, profile, method, capability, human(profile.profile))
    if app_of(ctx).verbose:
        for server in skipped:
            note(f"llmc: {server} offers no {capability}: skipped")
    rows = [{"server": server, **item} for server, items in per_server.items() for item in items]
    return_rows(rows, failures, fmt, key, len(catalog.specs), COLUMNS[key])


def return_rows(
    rows: list[dict[str, Any]],
    failures: list[Any],
    fmt: str,
    key: str,
    total: int,
    columns: list[str],
    table_rows: list[dict[str, Any]] | None = None,
) -> None:
    emit_listing(key, rows, fmt, [f.to_json() for f in failures], columns=columns, table_rows=table_rows)
    raise_failures(failures, total)


@click.group()
def resources() -> None:
    """List and read server resources."""


@resources.command("list")
@FORMAT
@target_options
@click.pass_context
def resources_list(ctx: click.Context, fmt: str, target: Target) -> None:
    """Resources of every server: {"resources": [...], "errors": [...]}."""
    _gather(ctx, target, fmt, "resources/list", "resources", "resources")


@resources.command("templates")
@FORMAT
@target_options
@click.pass_context
def resources_templates(ctx: click.Context, fmt: str, target: Target) -> None:
    """Resource templates of every server."""
    _gather(ctx, target, fmt, "resources/templates/list", "resourceTemplates", "resources")


@resources.command("read")
@click.argument("uri")
@target_options
@click.pass_context
def resources_read(ctx: click.Context, uri: str, target: Target) -> None:
    """Read one resource: SERVER.URI (as the gateway names it; SERVER:URI an alias), or the URI
    alone when one server is targeted; under the profile's policy ([policy.resources]; exit 4
    when denied) and audited."""

    catalog, profile = open_target(ctx, target, warm=False)  # only the one server starts
    with catalog:
        server, uri = read_target(catalog, "resource", uri)
        outcome = command_calls(ctx, catalog, profile, "resources read", ask=False).run(services.Read(server, "resource", uri))
    emit({"server": server, **outcome.raw})


@click.group()
def prompts() -> None:
    """List and get server prompts."""


@prompts.command("list")
@FORMAT
@target_options
@click.pass_context
def prompts_list(ctx: click.Context, fmt: str, target: Target) -> None:
    """Prompts of every server: {"prompts": [...], "errors": [...]}."""
    _gather(ctx, target, fmt, "prompts/list", "prompts", "prompts")


@prompts.command("get")
@click.argument("name")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option(
    "--validate/--no-validate",
    default=True,
    show_default=True,
    help="Check the arguments against the prompt's declared ones before getting it (exit 2 when they do not fit).",
)
@target_options
@click.pass_context
def prompts_get(ctx: click.Context, name: str, pairs: tuple[str, ...], validate: bool, target: Target) -> None:
    """Get one prompt (SERVER.NAME, or NAME when one server is targeted) with its arguments, under
    the profile's policy ([policy.prompts]; exit 4 when denied) and audited.

    The prompt and its arguments are checked against the server's prompts/list first: an unknown
    prompt or argument name, or a required argument left out, is exit 2 and nothing is asked."""

    catalog, profile = open_target(ctx, target, warm=False)  # only the one server starts
    with catalog:
        server, rest = read_target(catalog, "prompt", name)
        arguments = {k: str(v) for k, v in parse_pairs(pairs, None).items()}  # prompt arguments are strings
        if validate:
            check_prompt_arguments(catalog.session(server), server, rest, arguments)
        request = services.Read(server, "prompt", rest, arguments)
        outcome = command_calls(ctx, catalog, profile, "prompts get", ask=False).run(request)
    emit({"server": server, **outcome.raw})


def check_prompt_arguments(session: Any, server: str, name: str, arguments: dict[str, str]) -> None:
    """As `call` checks a tool's arguments: the prompt must be one the server lists, every
    argument one it declares, every required one given (UsageError, exit 2). A server whose
    prompts/list fails is left to judge prompts/get itself."""

    try:
        listed = session.list_all("prompts/list", "prompts")
    except LlmcError:
        return
    prompt = next((p for p in listed if isinstance(p, dict) and p.get("name") == name), None)
    if prompt is None:
        names = [str(p.get("name")) for p in listed if isinstance(p, dict)]
        raise UsageError(
            f"server {server} has no prompt named {name!r}"
            + (did_you_mean(name, names) or f" (prompts: {', '.join(names) or 'none'})")
        )
    declared = [a for a in prompt.get("arguments") or [] if isinstance(a, dict) and isinstance(a.get("name"), str)]
    names = [a["name"] for a in declared]
    for key in arguments:
        if key not in names:
            raise UsageError(
                f"{server}.{name}: unknown argument {key!r}"
                + (did_you_mean(key, names) or f" (arguments: {', '.join(names) or 'none'})")
            )
    missing = [a["name"] for a in declared if a.get("required") and a["name"] not in arguments]
    if missing:
        raise UsageError(f"{server}.{name}: missing required argument {missing[0]!r}")


@click.command()
@FORMAT
@target_options
@click.pass_context
def ping(ctx: click.Context, fmt: str, target: Target) -> None:
    """Connect to every server and ping it: era, protocol version, server info, round trip."""

    catalog, _ = open_target(ctx, target)

    def check(server: str) -> dict[str, Any]:
        session = catalog.session(server)
        connect = catalog.pool.connect_seconds.get(server, 0.0)  # measured where it happened (warm-up)
        if session.era == "modern" and not session.server_info:
            # The era came from the cache, so nothing was asked yet and the server may still be
            # starting: its first answer (server/discover, as a handshake) belongs to connecting.
            started = time.monotonic()
            session.discover()
            connect += time.monotonic() - started
        started = time.monotonic()
        session.ping()
        return {
            "server": server,
            "era": session.era,
            "protocolVersion": session.protocol_version,
            "serverInfo": session.server_info,
            "connectMs": round(connect * 1000, 1),
            "pingMs": round((time.monotonic() - started) * 1000, 1),
        }

    with catalog:
        results, failures = catalog.each(check)
    rows = list(results.values())
    people = [{**r, "serverInfo": " ".join(str((r["serverInfo"] or {}).get(k) or "") for k in ("name", "version"))} for r in rows]
    return_rows(
        rows,
        failures,
        fmt,
        "servers",
        len(catalog.specs),
        ["server", "serverInfo", "protocolVersion", "era", "connectMs", "pingMs"],
        people,
    )


def read_target(catalog: Catalog, kind: str, text: str) -> tuple[str, str]:
    """(server, URI or prompt name) as a command names them: a resource as SERVER.URI, as the
    gateway names resources (`sdk.test://greeting`), or SERVER:URI, an alias (`sdk:test://greeting`);
    a prompt as SERVER.NAME; or the URI or name alone when one server is targeted. A URI's own
    scheme (`test://...`, `file:///...`) is never taken for a server."""

    server, dot, rest = text.partition(".")
    if dot and rest and server in catalog.specs:
        return server, rest
    if kind == "resource":
        server, colon, rest = text.partition(":")
        if colon and rest and server in catalog.specs and not rest.startswith("//"):
            return server, rest
    if len(catalog.specs) != 1:
        spelling = "SERVER.URI" if kind == "resource" else "SERVER.NAME"
        raise UsageError(f"name the server: {spelling} (servers: {', '.join(catalog.specs)})")
    return next(iter(catalog.specs)), text

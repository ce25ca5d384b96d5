"""`llmc resources list|read`, `llmc prompts list|get`, `llmc ping`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from llmc_cli.cli.arguments import parse_pairs
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note, raise_failures
from llmc_cli.cli.targets import Target, target_options

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog

FORMAT = format_option(*FORMATS, listing=True)


# A listing's columns for people (what the server sent stays in JSON).
COLUMNS = {"resources": ["server", "name", "uri", "mimeType", "description"],
           "resourceTemplates": ["server", "name", "uriTemplate", "mimeType", "description"],
           "prompts": ["server", "name", "arguments", "description"]}


def _gather(ctx: click.Context, target: Target, fmt: str, method: str, key: str, capability: str) -> None:
    """A listing across servers, without what the profile's policy denies; a server without the
    capability is skipped, not failed."""
    from llmc_cli import services
    from llmc_cli.cli.common import open_catalog

    catalog, profile = open_catalog(ctx, target, warm=False)  # a server the policy denies whole never starts
    with catalog:
        per_server, skipped, failures = services.visible_offered(catalog, profile, method, capability)
    if app_of(ctx).verbose:
        for server in skipped:
            note(f"llmc: {server} offers no {capability}: skipped")
    rows = [{"server": server, **item} for server, items in per_server.items() for item in items]
    return_rows(rows, failures, fmt, key, len(catalog.specs), COLUMNS[key])


def return_rows(rows: list[dict[str, Any]], failures: list[Any], fmt: str, key: str,
                total: int, columns: list[str], table_rows: list[dict[str, Any]] | None = None) -> None:
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
    """Read one resource (SERVER:URI or a URI when one server is targeted), under the profile's
    policy ([policy.resources]; exit 4 when denied) and audited."""
    from llmc_cli import services
    from llmc_cli.cli.common import open_catalog

    catalog, profile = open_catalog(ctx, target, warm=False)  # only the one server starts
    with catalog:
        server, uri = read_target(catalog, "resource", uri)
        invocation = services.Invocation(profile=profile, command="resources read", caller="human")
        result = services.read(catalog, invocation, services.Read(server, "resource", uri))
    emit({"server": server, **result})


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
@target_options
@click.pass_context
def prompts_get(ctx: click.Context, name: str, pairs: tuple[str, ...], target: Target) -> None:
    """Get one prompt (SERVER.NAME, or NAME when one server is targeted) with its arguments, under
    the profile's policy ([policy.prompts]; exit 4 when denied) and audited."""
    from llmc_cli import services
    from llmc_cli.cli.common import open_catalog

    catalog, profile = open_catalog(ctx, target, warm=False)  # only the one server starts
    with catalog:
        server, rest = read_target(catalog, "prompt", name)
        arguments = {k: str(v) for k, v in parse_pairs(pairs, None).items()}  # prompt arguments are strings
        invocation = services.Invocation(profile=profile, command="prompts get", caller="human")
        result = services.read(catalog, invocation, services.Read(server, "prompt", rest, arguments))
    emit({"server": server, **result})


@click.command()
@FORMAT
@target_options
@click.pass_context
def ping(ctx: click.Context, fmt: str, target: Target) -> None:
    """Connect to every server and ping it: era, protocol version, server info, round trip."""
    from llmc_cli.cli.common import open_catalog

    catalog, _ = open_catalog(ctx, target)

    def check(server: str) -> dict[str, Any]:
        started = time.monotonic()
        session = catalog.session(server)
        connected = time.monotonic()
        session.ping()
        return {"server": server, "era": session.era, "protocolVersion": session.protocol_version,
                "serverInfo": session.server_info, "connectMs": round((connected - started) * 1000, 1),
                "pingMs": round((time.monotonic() - connected) * 1000, 1)}

    with catalog:
        results, failures = catalog.each(check)
    rows = list(results.values())
    people = [{**r, "serverInfo": " ".join(str((r["serverInfo"] or {}).get(k) or "") for k in ("name", "version"))}
              for r in rows]
    return_rows(rows, failures, fmt, "servers", len(catalog.specs),
                ["server", "serverInfo", "protocolVersion", "era", "connectMs", "pingMs"], people)


def read_target(catalog: "Catalog", kind: str, name: str) -> tuple[str, str]:
    """(server, URI or prompt name) of SERVER:URI (kind "resource") or SERVER.NAME ("prompt"), or
    of a bare URI or name when one server is targeted."""
    from llmc_cli.errors import UsageError

    separator = ":" if kind == "resource" else "."
    server, found, rest = name.partition(separator)
    if found and server in catalog.specs and (kind == "prompt" or (rest and not rest.startswith("//"))):
        return server, rest
    if len(catalog.specs) != 1:
        raise UsageError(f"name the server: SERVER{separator}{'URI' if kind == 'resource' else 'NAME'} "
                         f"(servers: {', '.join(catalog.specs)})")
    return next(iter(catalog.specs)), name

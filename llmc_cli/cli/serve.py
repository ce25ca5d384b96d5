"""`llmc serve -p PROFILE [--http ADDR]`: the gateway, the profile's toolbox as one MCP server for
any MCP host; `llmc serve workspace`: the built-in workspace server on stdio."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import click

from llmc_cli.cli.common import start_telemetry
from llmc_cli.cli.complete import complete_profiles
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.config.profile_writer import update_profile
from llmc_cli.config.profiles import editable_path, load_profile
from llmc_cli.errors import UsageError
from llmc_cli.gateway import run
from llmc_cli.gateway.principals import new_token, token_hash
from llmc_cli.server.stdio import log, run_stdio
from llmc_cli.server.workspace import make_workspace_server


@click.group(invoke_without_command=True)
@click.option(
    "--profile",
    "-p",
    "profile_name",
    metavar="NAME|PATH",
    shell_complete=complete_profiles,
    help="The profile whose servers the gateway serves (default: llmc's own -p / LLMC_PROFILE).",
)
@click.option(
    "--http",
    "http",
    metavar="[HOST:]PORT",
    help="Serve Streamable HTTP on this address (default host 127.0.0.1) instead of stdio.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=1800,
    show_default=True,
    metavar="SECONDS",
    help="With --http: end host sessions unused this long (one that never got past initialize "
    "after 1/30 of it, one that never called a tool after 1/6).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    metavar="N",
    help="With --http: admitted requests answered at once (a worker thread each); with every one busy a request is answered 503.",
)
@click.option(
    "--max-pending-connections",
    "max_pending",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    metavar="N",
    help="With --http: room beyond --max-connections for connections and requests not yet "
    "admitted (nobody's token); past both the server answers 503.",
)
@click.option(
    "--pending-timeout",
    "pending_timeout",
    type=click.FloatRange(min=0.1),
    default=5,
    show_default=True,
    metavar="SECONDS",
    help="With --http: a connection with no admitted request must send a whole request head within this.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0.1),
    default=30,
    show_default=True,
    metavar="SECONDS",
    help="With --http: a request's head and body must arrive within this (a client trickling "
    "them is cut off), and a kept-alive connection's next request begin.",
)
@click.option("--tls-cert", metavar="FILE", help="With --http: serve HTTPS with this PEM certificate (chain).")
@click.option("--tls-key", metavar="FILE", help="With --http: the PEM private key of --tls-cert.")
@click.option(
    "--tls-client-ca",
    metavar="FILE",
    help="With --tls-cert: require client certificates signed by these PEM CAs (mutual TLS); a "
    "principal's tls_subject names the certificates that prove it.",
)
@click.option(
    "--workers",
    metavar="N|auto",
    help="With --http: N processes serve the address (auto: one per CPU), sharing the audit trail, "
    "rate limits and approvals; a host session stays with the worker that opened it. Default: the "
    "profile's [serve] workers, else 1.",
)
@click.option(
    "--name-separator",
    type=click.Choice([".", "__", "_"]),
    help="How hosts see tool and prompt names: SERVER.TOOL, SERVER__TOOL or SERVER_TOOL (the last two "
    "provider-safe, for hosts that hand names to a model provider; default: the profile's [serve] name_separator).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    profile_name: str | None,
    http: str | None,
    idle_timeout: float,
    max_connections: int,
    request_timeout: float,
    max_pending: int,
    pending_timeout: float,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    name_separator: Literal[".", "__", "_"] | None,
    workers: str | None,
) -> None:
    """Serve a profile's tools to any MCP host: tools named SERVER.TOOL, every call under the
    profile's policy and in its audit trail. stdout carries MCP only (stdio).

    \b
    llmc serve -p readonly                       # stdio: put this in a host's MCP config
    llmc serve -p ops --http 127.0.0.1:8765      # Streamable HTTP at http://127.0.0.1:8765/mcp
    llmc serve -p ops --http 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem   # HTTPS
    llmc serve workspace --root DIR              # the built-in workspace server
    """
    tls = _tls(http, tls_cert, tls_key, tls_client_ca)
    if ctx.invoked_subcommand is not None:
        if http or name_separator or workers or (profile_name and ctx.invoked_subcommand != "token"):
            raise UsageError(
                f"-p/--http/--name-separator/--workers belong to the gateway (llmc serve -p PROFILE), not to serve {ctx.invoked_subcommand}"
            )
        ctx.ensure_object(dict)
        if profile_name:
            app_of(ctx).profile = profile_name  # the profile `serve token` edits
        return

    name = profile_name or app_of(ctx).profile
    if not name:
        raise UsageError("name the profile to serve: llmc serve -p PROFILE (or run llmc serve workspace)")
    verbose = app_of(ctx).verbose
    profile = load_profile(name)
    if name_separator:  # this host's need, over the profile's (llmc servers install writes it)
        serve_config = replace(profile.profile.serve, name_separator=name_separator)
        profile = replace(profile, profile=replace(profile.profile, serve=serve_config))

    if workers is not None and not http:
        raise UsageError("--workers needs --http: a stdio gateway serves one host")
    if http:
        count = run.worker_count(workers if workers is not None else profile.profile.serve.workers)
        run.serve_http(
            profile,
            http,
            verbose=verbose,
            idle_seconds=idle_timeout,
            max_connections=max_connections,
            request_seconds=request_timeout,
            max_pending=max_pending,
            pending_seconds=pending_timeout,
            tls=tls,
            workers=count,
            setup=lambda: start_telemetry("llmc serve", profile),  # in each worker: its exporter threads
        )
    else:
        start_telemetry("llmc serve", profile)
        run.serve_stdio(profile, verbose=verbose)


def _tls(http: str | None, cert: str | None, key: str | None, client_ca: str | None) -> tuple[str, str, str | None] | None:
    """(cert, key, client CA) when the options ask for TLS; UsageError for a combination that
    cannot work."""
    if not (cert or key or client_ca):
        return None
    if not http:
        raise UsageError("--tls-cert, --tls-key and --tls-client-ca need --http")
    if not (cert and key):
        raise UsageError("--tls-cert and --tls-key go together: the certificate and its private key (PEM)")
    return cert, key, client_ca


@serve.command()
@click.option(
    "--root",
    "roots",
    multiple=True,
    metavar="DIR",
    help="A directory the server may use (repeatable; default: the current directory).",
)
@click.option("--read-only", is_flag=True, help="Hide every writing tool and every process tool.")
@click.option(
    "--allow-command",
    "allow_commands",
    multiple=True,
    metavar="EXE",
    help="An executable processes may run (repeatable; matched on its real path). Default: none.",
)
@click.option("--allow-shell", is_flag=True, help="Also accept shell command lines (/bin/sh -c): anything may run.")
@click.option("--allow-network", is_flag=True, help="Give processes the network (bwrap sandbox only).")
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "bwrap", "none"]),
    default="auto",
    show_default=True,
    help="auto: bwrap when installed, else no process tools; none: run processes unsandboxed.",
)
@click.option(
    "--protect",
    "protect",
    multiple=True,
    metavar="PATH",
    help="Also keep this file or directory off limits (repeatable). llmc's own config and state "
    "directories always are, and llmc names its profile, audit log and lock when it starts this.",
)
def workspace(
    roots: tuple[str, ...],
    read_only: bool,
    allow_commands: tuple[str, ...],
    allow_shell: bool,
    allow_network: bool,
    sandbox: str,
    protect: tuple[str, ...],
) -> None:
    """Files, search and processes under the given roots, over stdio (stdout carries MCP only)."""

    endpoint = make_workspace_server(
        list(roots) or ["."],
        read_only,
        allow_commands=list(allow_commands),
        allow_shell=allow_shell,
        allow_network=allow_network,
        sandbox=sandbox,
        protect=list(protect),
    )
    log(endpoint.instructions or "ready")
    run_stdio(endpoint)


@serve.group()
def token() -> None:
    """Bearer tokens of the HTTP gateway's principals ([serve.principals.NAME] in the profile)."""


@token.command("create")
@click.argument("name")
@click.option(
    "--for-profile",
    "for_profile",
    metavar="NAME",
    help="The profile whose tools this principal gets (default: the profile served).",
)
@click.pass_context
def token_create(ctx: click.Context, name: str, for_profile: str | None) -> None:
    """Make a new token for principal NAME: its SHA-256 goes into the profile, the token itself
    is printed once on stdout ({"principal", "token"}) and kept nowhere. The profile then says
    [serve] auth = "required": from now on the gateway lets in only principals."""

    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise UsageError(f"principal name {name!r}: use letters, digits, '-' and '_'")
    if for_profile:
        # The gateway loads this profile for the principal's first request: a name it cannot
        # load would leave a token that lets nobody in, found only then.

        load_profile(for_profile)
    path = editable_path(app_of(ctx).profile)
    secret = new_token()
    was_open = False

    def add(data: dict[str, Any]) -> None:
        nonlocal was_open
        serve = data.setdefault("serve", {})
        was_open = serve.get("auth") == "none"
        serve["auth"] = "required"  # written out, so that no later edit of the principals opens the door
        principals = serve.setdefault("principals", {})
        entry = {"token_sha256": token_hash(secret)}
        kept = (principals.get(name) or {}).get("tls_subject")
        if kept:  # a principal its certificate also proves keeps that
            entry["tls_subject"] = kept
        if for_profile:
            entry["profile"] = for_profile
        principals[name] = entry

    update_profile(path, add)
    note(f"llmc: principal {name} added to {path}; the token is shown only now")
    if was_open:
        note('llmc: [serve] auth = "none" is now "required": only principals get in')
    emit({"principal": name, "profile": for_profile or path.stem, "token": secret}, "json")  # the profile it gets


@token.command("list")
@format_option(*FORMATS, listing=True)
@click.pass_context
def token_list(ctx: click.Context, fmt: str) -> None:
    """The principals of the profile (names and profiles; tokens are never stored)."""

    profile = load_profile(app_of(ctx).profile)
    rows = [
        {
            "principal": n,
            "profile": p.profile,
            "token": "env:" + p.token_env if p.token_env else "sha256" if p.token_sha256 else "none (tls)",
        }
        for n, p in (profile.profile.serve.principals or {}).items()
    ]
    emit_listing("principals", rows, fmt, columns=["principal", "profile", "token"])


@token.command("revoke")
@click.argument("name")
@click.pass_context
def token_revoke(ctx: click.Context, name: str) -> None:
    """Remove principal NAME: its token stops working at once, a running gateway included. The
    last one removed leaves a gateway nobody can reach, never an open one ([serve] auth =
    "required" stays in the profile)."""

    path = editable_path(app_of(ctx).profile)
    left = 0

    def remove(data: dict[str, Any]) -> None:
        nonlocal left
        serve = data.get("serve") or {}
        principals = serve.get("principals") or {}
        if name not in principals:
            raise UsageError(f"no principal {name!r} in {path}")
        del principals[name]
        serve["auth"] = "required"
        left = len(principals)

    update_profile(path, remove)
    if not left:
        note(
            f"llmc: no principal is left in {path}: nobody can reach its gateway until one is added "
            f"(llmc serve token create NAME -p {app_of(ctx).profile})"
        )
    emit({"principal": name, "revoked": True}, "json")

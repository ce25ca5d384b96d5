"""`llmc serve -p PROFILE [--http ADDR]`: the gateway, the profile's toolbox as one MCP server for
any MCP host; `llmc serve workspace`: the built-in workspace server on stdio."""

from __future__ import annotations


import click

from llmc_cli.cli.complete import complete_profiles
from llmc_cli.errors import UsageError


@click.group(invoke_without_command=True)
@click.option("--profile", "-p", "profile_name", metavar="NAME|PATH", shell_complete=complete_profiles,
              help="The profile whose servers the gateway serves (default: llmc's own -p / LLMC_PROFILE).")
@click.option("--http", "http", metavar="[HOST:]PORT",
              help="Serve Streamable HTTP on this address (default host 127.0.0.1) instead of stdio.")
@click.pass_context
def serve(ctx: click.Context, profile_name: str | None, http: str | None) -> None:
    """Serve a profile's tools to any MCP host: tools named SERVER.TOOL, every call under the
    profile's policy and in its audit trail. stdout carries MCP only (stdio).

    \b
    llmc serve -p readonly                       # stdio: put this in a host's MCP config
    llmc serve -p ops --http 127.0.0.1:8765      # Streamable HTTP at http://127.0.0.1:8765/mcp
    llmc serve workspace --root DIR              # the built-in workspace server
    """
    if ctx.invoked_subcommand is not None:
        if profile_name or http:
            raise UsageError(f"-p/--http belong to the gateway (llmc serve -p PROFILE), not to serve "
                             f"{ctx.invoked_subcommand}")
        return
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway import run

    name = profile_name or (ctx.obj or {}).get("profile")
    if not name:
        raise UsageError("name the profile to serve: llmc serve -p PROFILE (or run llmc serve workspace)")
    verbose = (ctx.obj or {}).get("verbose", 0)
    profile = load_profile(name)
    if http:
        run.serve_http(profile, http, verbose=verbose)
    else:
        run.serve_stdio(profile, verbose=verbose)


@serve.command()
@click.option("--root", "roots", multiple=True, metavar="DIR",
              help="A directory the server may use (repeatable; default: the current directory).")
@click.option("--read-only", is_flag=True, help="Hide every writing tool and every process tool.")
@click.option("--allow-command", "allow_commands", multiple=True, metavar="EXE",
              help="An executable processes may run (repeatable; matched on its real path). Default: none.")
@click.option("--allow-shell", is_flag=True, help="Also accept shell command lines (/bin/sh -c): anything may run.")
@click.option("--allow-network", is_flag=True, help="Give processes the network (bwrap sandbox only).")
@click.option("--sandbox", type=click.Choice(["auto", "bwrap", "none"]), default="auto", show_default=True,
              help="auto: bwrap when installed, else no process tools; none: run processes unsandboxed.")
@click.option("--protect", "protect", multiple=True, metavar="PATH",
              help="Also keep this file or directory off limits (repeatable). llmc's own config and state "
                   "directories always are, and llmc names its profile, audit log and lock when it starts this.")
def workspace(roots: tuple[str, ...], read_only: bool, allow_commands: tuple[str, ...], allow_shell: bool,
              allow_network: bool, sandbox: str, protect: tuple[str, ...]) -> None:
    """Files, search and processes under the given roots, over stdio (stdout carries MCP only)."""
    from llmc_cli.server.stdio import log, run_stdio
    from llmc_cli.server.workspace import make_workspace_server

    endpoint = make_workspace_server(list(roots) or ["."], read_only, allow_commands=list(allow_commands),
                                     allow_shell=allow_shell, allow_network=allow_network, sandbox=sandbox,
                                     protect=list(protect))
    log(endpoint.instructions or "ready")
    run_stdio(endpoint)



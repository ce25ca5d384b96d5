"""`llmc serve workspace`: the built-in workspace server as a stdio MCP server for any MCP host."""

from __future__ import annotations

import click


@click.group()
def serve() -> None:
    """Run one of llmc's built-in MCP servers on stdio."""


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
def workspace(roots: tuple[str, ...], read_only: bool, allow_commands: tuple[str, ...], allow_shell: bool,
              allow_network: bool, sandbox: str) -> None:
    """Files, search and processes under the given roots, over stdio (stdout carries MCP only)."""
    from llmc_cli.server.stdio import log, run_stdio
    from llmc_cli.server.workspace import make_workspace_server

    endpoint = make_workspace_server(list(roots) or ["."], read_only, allow_commands=list(allow_commands),
                                     allow_shell=allow_shell, allow_network=allow_network, sandbox=sandbox)
    log(endpoint.instructions or "ready")
    run_stdio(endpoint)

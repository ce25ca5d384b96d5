"""`llmc auth login|status|logout`: OAuth for remote servers (llmc_cli/mcp/auth/ does the work).

Tokens never reach stdout or stderr: these commands print who is logged in where, not with what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.cli.targets import _complete_servers
from llmc_cli.config.profiles import load_profile, server_specs
from llmc_cli.errors import UsageError
from llmc_cli.mcp.auth import OAuth
from llmc_cli.model import ServerSpec
from llmc_cli.store import token_store

if TYPE_CHECKING:
    from llmc_cli.model import ServerSpec


@click.group()
def auth() -> None:
    """Log in to remote servers with OAuth; show and remove stored tokens.

    Tokens are stored in the state directory (oauth/, readable only by you), keyed by
    authorization server and resource. Commands that talk to a server authorize by themselves
    when it answers 401 and a browser can be used; in CI use a stored refresh token or
    `grant = "client_credentials"` with client_id and client_secret_env in the profile.
    """


@auth.command("login")
@click.argument("server", shell_complete=_complete_servers)
@click.option(
    "--no-browser",
    is_flag=True,
    help="Print the authorization URL instead of opening a browser; on a terminal the address the "
    "browser was redirected to can be pasted back (for SSH sessions).",
)
@click.pass_context
def login(ctx: click.Context, server: str, no_browser: bool) -> None:
    """Authorize llmc for SERVER (a server of the profile, or a URL) and store the tokens.
    Prints the stored login (no token values)."""

    spec = _remote_spec(ctx, server)
    oauth = OAuth(spec, interactive=True, open_browser=not no_browser, notify=note, store=token_store())
    try:
        view = oauth.login()
    finally:
        oauth.close()
    note(f"llmc: authorized {spec.name}")
    emit(view)


@auth.command("status")
@format_option(*FORMATS, listing=True)
def status(fmt: str) -> None:
    """Stored logins: server, resource, authorization server, client, scope, expiry; never a
    token. JSON: {"logins": [...]}."""

    rows = [r.public_view() for r in token_store().records()]
    emit_listing("logins", rows, fmt, columns=["server", "serverUrl", "issuer", "scope", "expiresAt", "hasRefreshToken"])


@auth.command("logout")
@click.argument("server", shell_complete=_complete_servers)
@click.pass_context
def logout(ctx: click.Context, server: str) -> None:
    """Delete the stored tokens (and registered client) of SERVER. Prints {"server", "removedCount"}: how many stored records (tokens, client) went."""

    spec = _remote_spec(ctx, server)
    removed = OAuth(spec, store=token_store(), interactive=False).logout()
    note(f"llmc: {spec.name}: " + ("logged out" if removed else "no stored login"))
    emit({"server": spec.name, "removedCount": removed})


def _remote_spec(ctx: click.Context, server: str) -> ServerSpec:

    if server.startswith(("http://", "https://")):
        return ServerSpec(name=server, url=server)
    loaded = load_profile(app_of(ctx).profile)
    spec = server_specs(loaded, [server])[0]
    if spec.kind != "remote":
        raise UsageError(f"server {server} is not a remote server: OAuth applies to url servers only")
    return spec

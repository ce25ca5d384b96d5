"""`llmc cache clear [--server S]`: drop the cached tool results of [cache]."""

from __future__ import annotations

import click

from llmc_cli import services
from llmc_cli.cli.context import App, pass_app
from llmc_cli.cli.output import emit


@click.group()
def cache() -> None:
    """Cached tool results ([cache] in the profile): files under the state directory, or the
    [state] url database when set."""


@cache.command("clear")
@click.option("--server", metavar="SERVER", help="Only this server's cached results.")
@pass_app
def clear(app: App, server: str | None) -> None:
    """Drop the cached results (every server's, or one's). JSON: {"cleared": N, "server": S|null,
    "store": "files"|"database"}."""

    state = services.open_state(app.load_profile())
    emit({"cleared": state.results.clear(server), "server": server, "store": state.kind})

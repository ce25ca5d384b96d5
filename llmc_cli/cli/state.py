"""`llmc state migrate`: create or upgrade the shared-state schema in PostgreSQL."""

from __future__ import annotations

import click

from llmc_cli.cli.context import App, pass_app
from llmc_cli.cli.output import emit
from llmc_cli.errors import ConfigError


@click.group()
def state() -> None:
    """Shared state in PostgreSQL ([state] url in the profile, or LLMC_STATE_URL)."""


@state.command("migrate")
@pass_app
def migrate(app: App) -> None:
    """Apply the missing schema versions (safe to run again, and from many machines at once).
    JSON: {"database": "PostgreSQL database HOST:PORT/DB", "version": N, "applied": [...]}."""
    from llmc_cli.store.postgres import URL_VAR, Database, state_url

    profile = app.load_profile()
    url = state_url(profile.profile.state.url)
    if not url:
        raise ConfigError(f"no state database: set [state] url in the profile or {URL_VAR}")
    emit(Database.for_url(url).migrate())

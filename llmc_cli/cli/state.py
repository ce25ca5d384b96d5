"""`llmc state migrate`: create or upgrade the shared-state schema in PostgreSQL."""

from __future__ import annotations

import click

from llmc_cli import services
from llmc_cli.cli.context import App, pass_app
from llmc_cli.cli.output import emit
from llmc_cli.errors import ConfigError
from llmc_cli.store.state import URL_VAR, PostgresState


@click.group()
def state() -> None:
    """Shared state in PostgreSQL ([state] url in the profile, or LLMC_STATE_URL)."""


@state.command("migrate")
@pass_app
def migrate(app: App) -> None:
    """Apply the missing schema versions (safe to run again, and from many machines at once).
    JSON: {"database": "PostgreSQL database HOST:PORT/DB", "version": N, "applied": [...]}."""

    state = services.open_state(app.load_profile())
    if not isinstance(state, PostgresState):
        raise ConfigError(f"no state database: set [state] url in the profile or {URL_VAR}")
    emit(state.database.migrate())

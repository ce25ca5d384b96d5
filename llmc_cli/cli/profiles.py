"""`llmc profiles list|show|init`: the TOML profiles under the config directory."""

from __future__ import annotations

from typing import Any

import click

from llmc_cli.cli.complete import complete_profiles
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.config import paths
from llmc_cli.config.profile_writer import init_default
from llmc_cli.config.profiles import list_profiles, load_profile
from llmc_cli.config.secrets import mask_url, shown_server
from llmc_cli.config.validation import dump


@click.group()
def profiles() -> None:
    """List, show and initialise profiles (profiles/NAME.toml under the config directory)."""


@profiles.command("list")
@format_option(*FORMATS, listing=True)
def list_(fmt: str) -> None:
    """Every profile file: name, path, description, servers; one that does not load is an entry
    in `errors` with its reason. JSON: {"directory": DIR, "profiles": [...], "errors": [...]}."""

    rows, errors = list_profiles()
    people = [*rows, *({"name": e["profile"], "error": e["message"]} for e in errors)]  # a broken profile is a row
    emit_listing(
        "profiles",
        rows,
        fmt,
        errors,
        envelope={"directory": str(paths.profiles_dir())},
        table_rows=people,
        columns=["name", "description", "servers", "error"],
    )


@profiles.command("show")
@click.argument("name", required=False, shell_complete=complete_profiles)
@click.pass_context
def show(ctx: click.Context, name: str | None) -> None:
    """The profile (NAME|PATH, else --profile, else the default) with every default filled in,
    ${VAR}s unexpanded, literal secrets masked."""

    loaded = load_profile(name or app_of(ctx).profile)
    data: dict[str, Any] = dump(loaded.profile)
    data["servers"] = {n: shown_server(s) for n, s in data["servers"].items()}
    if isinstance(data.get("state", {}).get("url"), str):
        data["state"]["url"] = mask_url(data["state"]["url"])
    emit({"name": loaded.name, "path": str(loaded.path) if loaded.path else None, "profile": data})


@profiles.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing default profile.")
def init(force: bool) -> None:
    """Write the built-in default profile (the workspace server, read-only) to
    profiles/default.toml so it can be edited. Prints {"created": PATH}."""

    path = init_default(force)
    note(f"llmc: wrote {path}")
    emit({"created": str(path)})

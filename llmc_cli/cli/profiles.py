"""`llmc profiles list|show|init`: the TOML profiles under the config directory."""

from __future__ import annotations

from typing import Any

import click

from llmc_cli.cli.complete import complete_profiles
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import format_option, emit, note


@click.group()
def profiles() -> None:
    """List, show and initialise profiles (profiles/NAME.toml under the config directory)."""


@profiles.command("list")
@format_option()
def list_(fmt: str) -> None:
    """Every profile file: name, path, description, servers; a broken one shows its error.
    JSON: {"profiles": [...], "directory": DIR}."""
    from llmc_cli.config import paths
    from llmc_cli.config.profiles import list_profiles

    rows = list_profiles()
    if fmt == "json":
        emit({"directory": str(paths.profiles_dir()), "profiles": rows})
    elif fmt == "table":
        emit([{**r, "servers": ", ".join(r.get("servers", []))} for r in rows], "table",
             columns=["name", "description", "servers", "error"])
    else:
        emit(rows, "jsonl")


@profiles.command("show")
@click.argument("name", required=False, shell_complete=complete_profiles)
@click.pass_context
def show(ctx: click.Context, name: str | None) -> None:
    """The profile (NAME|PATH, else --profile, else the default) with every default filled in,
    ${VAR}s unexpanded, literal secrets masked."""
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.config.secrets import mask_secrets
    from llmc_cli.config.validation import dump

    loaded = load_profile(name or app_of(ctx).profile)
    data: dict[str, Any] = dump(loaded.profile)
    data["servers"] = {n: mask_secrets(s) for n, s in data["servers"].items()}
    emit({"name": loaded.name, "path": str(loaded.path) if loaded.path else None, "profile": data})


@profiles.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing default profile.")
def init(force: bool) -> None:
    """Write the built-in default profile (the workspace server, read-only) to
    profiles/default.toml so it can be edited. Prints {"created": PATH}."""
    from llmc_cli.config.profile_writer import init_default

    path = init_default(force)
    note(f"llmc: wrote {path}")
    emit({"created": str(path)})

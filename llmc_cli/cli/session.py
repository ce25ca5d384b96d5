"""`llmc session start|list|stop|forget`: session keepers (servers that outlive one command), and
`forget` for remembered HTTP sessions (mcp/session_ids.py), which are not keepers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from llmc_cli import services
from llmc_cli.cli.context import app_of
from llmc_cli.cli.durations import parse_duration
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.cli.targets import Target, complete_sessions, server_options
from llmc_cli.config.profiles import load_profile, server_specs
from llmc_cli.errors import ConnectionFailed, LlmcError, UsageError
from llmc_cli.keeper import lifecycle
from llmc_cli.mcp import session_ids
from llmc_cli.model import ServerSpec
from llmc_cli.store import client_stores


def parse_idle(text: str) -> float:
    """--idle: a duration; 0 means never."""
    seconds = parse_duration(text)
    if seconds is None:
        raise UsageError(f"--idle expects a duration like 90s, 30m, 2h or 0 (never), got {text!r}")
    return seconds


@click.group()
def session() -> None:
    """Keep servers running between commands: a session keeper holds their connections (and a
    shell started through a process tool stays alive); commands join it with --session NAME or
    LLMC_SESSION=NAME. Policy and the audit log still run in each command."""


@session.command()
@click.argument("name")
@click.option(
    "--idle",
    default="30m",
    show_default=True,
    metavar="DURATION",
    help="Stop after this long without a command (90s, 30m, 2h; 0: never).",
)
@server_options
@click.pass_context
def start(ctx: click.Context, name: str, idle: str, target: Target) -> None:
    """Start session NAME with the profile's servers (or -s ones, or --stdio/--url) and print it.

    Exit 5 when a server failed to start (the session holds the others); when none started,
    no session is left behind."""

    seconds = parse_idle(idle)
    profile_name = app_of(ctx).profile
    adhoc = target.adhoc_spec()
    profile = None if adhoc else app_of(ctx).load_profile()
    specs, unusable = services.launch_specs(profile, tuple(target.servers), adhoc, target.timeout, target.connect_timeout)
    if unusable and not specs:
        raise next(iter(unusable.values()))
    if not specs:
        raise UsageError("no servers to keep: the profile has none enabled (add one, or use -s/--stdio/--url)")
    # the profile's name as loaded (`default` when none was named); an ad-hoc server has none
    known = services.server_reach(profile, tuple(s.name for s in specs), adhoc)
    status = lifecycle.start(name, specs, idle=seconds, profile=profile_name or (profile.name if profile else None), reach=known)
    status["servers"] += [{"name": n, "state": "unusable", "error": e.message} for n, e in unusable.items()]
    emit(_public(status, name))
    failed = [s for s in status["servers"] if s.get("state") != "running"]
    for server in failed:
        note(f"llmc: {server['name']}: {server.get('error', server.get('state'))}")
    if failed:
        retried = " and tries the ones that failed to start again when they are called" if len(failed) > len(unusable) else ""
        raise ConnectionFailed(
            f"{len(failed)} of {len(specs) + len(unusable)} server(s) failed to start; session {name} holds the others{retried}"
        )


@session.command("list")
@format_option(*FORMATS, listing=True)
def list_(fmt: str) -> None:
    """Running sessions with their servers, clients and idle time. Stale sockets (a killed
    keeper, a reboot) are removed and reported on stderr."""

    rows, errors = [], []
    for name in lifecycle.names():
        try:
            rows.append(_public(lifecycle.status(name, timeout=3.0), name))
        except ConnectionFailed:
            note(f"llmc: removed stale session {name} (its keeper is gone)")
        except LlmcError as exc:  # one unresponsive keeper must not hide the others: an `errors` entry
            note(f"llmc: session {name} does not answer: {exc.message}")
            errors.append({"session": name, **exc.to_json()})
    people = [{**r, "servers": ", ".join(f"{s['name']}:{s['state']}" for s in r.get("servers", []))} for r in rows]
    emit_listing(
        "sessions",
        rows,
        fmt,
        errors,
        table_rows=people,
        columns=["name", "pid", "servers", "clients", "idleFor", "idleTimeout", "started"],
    )


@session.command()
@click.argument("names", nargs=-1, shell_complete=complete_sessions)
@click.option("--all", "every", is_flag=True, help="Stop every running session.")
def stop(names: tuple[str, ...], every: bool) -> None:
    """Stop sessions (their servers stop with them). Exit 5 when one was not running."""

    if every == bool(names):
        raise UsageError("name the sessions to stop, or give --all")
    targets = lifecycle.names() if every else list(names)
    results: list[dict[str, Any]] = []
    errors: list[LlmcError] = []
    for name in targets:
        try:
            results.append(lifecycle.stop(name))
        except ConnectionFailed as exc:
            if not every:
                errors.append(exc)
        except LlmcError as exc:  # a hung keeper (timeout) must not keep the other sessions running
            errors.insert(0, exc)
    emit(results, "jsonl")
    if errors:
        for error in errors[1:]:
            note(f"llmc: {error.message}")
        raise errors[0]


@session.command()
@click.option(
    "-s",
    "--server",
    "servers",
    multiple=True,
    metavar="NAME",
    help="Only the remembered HTTP sessions of these servers of the profile (repeatable).",
)
@click.option("--url", "urls", multiple=True, metavar="URL", help="Only the remembered HTTP session with this server URL.")
@click.pass_context
def forget(ctx: click.Context, servers: tuple[str, ...], urls: tuple[str, ...]) -> None:
    """Drop remembered HTTP sessions (Mcp-Session-Id), so the next command starts a new one.
    Without options: all of them. Each server is asked to end its session (HTTP DELETE)."""

    profile_name = app_of(ctx).profile
    if servers:
        known = {s.cache_key(): s for s in server_specs(load_profile(profile_name), servers)}
    else:
        try:  # headers and logins of the profile's servers, for the DELETE
            known = {s.cache_key(): s for s in server_specs(load_profile(profile_name), ())}
        except LlmcError:
            known = {}
    keys: set[str] | None = None
    if servers or urls:
        keys = {k for k, s in known.items() if s.name in servers} | {ServerSpec(name="url", url=u).cache_key() for u in urls}
    emit(session_ids.forget(client_stores(), keys, known), "jsonl")


def _public(status: Mapping[str, object], name: str) -> dict[str, Any]:

    out = {k: v for k, v in status.items() if k != "llmc"}
    out.setdefault("name", name)
    out["socket"] = str(lifecycle.socket_path(name))
    out["log"] = str(lifecycle.log_path(name))
    return out

"""What every server-facing command does first: pick the profile and servers, wire the client
hooks (progress, logs, elicitation) to the terminal, open the catalog."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import cli, services, telemetry
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import note, status_line, warn
from llmc_cli.cli.starting import Started, start_servers
from llmc_cli.cli.targets import Target
from llmc_cli.config.profiles import load_profile
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.errors import SessionHoldsServers, UsageError
from llmc_cli.mcp.hooks import ClientHooks, accept_defaults, decline
from llmc_cli.model import collector_paused

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.services import Pipeline
    from llmc_cli.services.tools import ToolResolver


def open_target(
    ctx: click.Context,
    target: Target,
    sample: Any = None,
    warm: bool = True,
    first: str | None = None,
    calling: str | None = None,
    started: Started | None = None,
) -> tuple[Catalog, LoadedProfile]:
    """The command's catalog and profile: its servers decided and the first ones started
    (cli/starting.py start_servers, with these arguments; or `started`, what the command's own
    call of it gave, before it loaded this module), then the catalog over them. Opened with
    the cyclic collector paused (model.collector_paused): this loads the catalog, client and
    transport modules, bounded work that makes long-lived objects and little garbage. The
    command's own work runs with it on."""
    if started is None:
        started = start_servers(ctx, target, warm, first, calling)
    with collector_paused():
        return _open_target(ctx, target, sample, warm, first, started)


def _open_target(
    ctx: click.Context, target: Target, sample: Any, warm: bool, first: str | None, started: Started
) -> tuple[Catalog, LoadedProfile]:
    adhoc, session, loaded, cleared, launched = started.adhoc, started.session, started.loaded, started.cleared, started.launched
    if loaded is not None:
        _telemetry(ctx, loaded)
    hooks, on_stderr = _client_hooks(ctx, target, sample)
    only = () if adhoc else tuple(target.servers)
    try:
        catalog = services.open_catalog(
            loaded, only, adhoc, hooks, on_stderr, target.timeout, session, first, target.connect_timeout, launched=launched
        )
    except SessionHoldsServers as exc:
        raise UsageError(f"--session {exc.session} uses the servers its keeper holds: drop --stdio/--url") from None
    if warm or adhoc:
        catalog.pool.warm_up(cleared)
    if loaded is None:  # an ad-hoc server: its profile loads while it starts
        try:
            loaded = load_profile(app_of(ctx).profile)
            _telemetry(ctx, loaded)
        except BaseException:
            catalog.close()  # its server stopped: the command ends here
            raise
    if app_of(ctx).verbose:
        catalog.say = note
    if sys.stderr.isatty():  # presentation only: nothing when stderr is a file or a pipe
        catalog.on_each = server_progress(ctx.command_path.removeprefix("llmc ").removeprefix("llmc"))
    return catalog, loaded


def _client_hooks(ctx: click.Context, target: Target, sample: Any) -> tuple[ClientHooks, Callable[[str, str], None] | None]:
    """How the command's connections show progress, logs and stderr, and answer elicitation
    and sampling; and where a stdio server's stderr lines go (-v: stderr, else nowhere)."""
    verbose = app_of(ctx).verbose
    elicit_mode = target.elicit or ("prompt" if app_of(ctx).interactive else "decline")
    hooks = ClientHooks(
        # Presentation only: progress extends --timeout whether it is shown or not.
        on_progress=_progress_line if sys.stderr.isatty() else _progress_note if verbose else None,
        on_log=(lambda p: note(f"[server log {p.get('level', '')}] {_short(p.get('data'))}")) if verbose else None,
        # (the questions, cli/prompt.py, load only where a person can be asked: cli/__init__.py)
        elicit=cli.elicit if elicit_mode == "prompt" else {"accept-defaults": accept_defaults, "decline": decline}[elicit_mode],
        sample=sample,  # sampling/createMessage: the profile's LLM answers only when it allows it
        on_notice=lambda text: _warn(ctx, text),
    )
    on_stderr = (lambda server, line: note(f"[{server} stderr] {line}")) if verbose else None
    return hooks, on_stderr


def server_progress(label: str) -> Callable[[int, list[str]], None]:
    """Work across servers on one line of the terminal, rewritten as each server settles and
    cleared at the end: `tools list: 3/5 servers (waiting: github, slack)`."""

    def show(total: int, waiting: list[str]) -> None:
        if waiting:
            status_line(f"{label}: {total - len(waiting)}/{total} servers (waiting: {', '.join(waiting)})")
        else:
            status_line("")

    return show


def start_telemetry(command: str, loaded: LoadedProfile | None = None) -> None:
    """OpenTelemetry for this command: from --otel or LLMC_OTEL (no profile yet), or the
    profile's [telemetry]. What it exports is masked as the audit log is (config.secrets.Masker)."""

    if loaded is None:
        telemetry.enable(command, Masker(environment_secrets()))
        return
    config = loaded.profile.telemetry
    # Off (the usual case): no masker to build, whose secrets walk the environment and the
    # profile and compile a pattern of them (issue 34: every command with a profile came here).
    if telemetry.enabled() or config.enabled or telemetry.env_requested():
        telemetry.enable_for_profile(command, Masker(environment_secrets(loaded.profile)), config)


def _telemetry(ctx: click.Context, loaded: LoadedProfile) -> None:
    start_telemetry(ctx.command_path, loaded)


def command_calls(
    ctx: click.Context,
    catalog: Catalog,
    profile: LoadedProfile,
    command: str,
    *,
    caller: str = "human",
    ask: bool = True,
    yes: bool = False,
    use_cache: bool = True,
    conversation_id: str | None = None,
    clearance: str | None = None,
) -> Pipeline:
    """This command's pipeline (services.open_calls): its calls and reads, confirmations asked
    on the terminal when there is one and `ask` (a batch never asks), `yes`: answered yes;
    `clearance`: the caller's (guard/clearance.py; None: the default of its kind)."""
    app = app_of(ctx)
    interactive = ask and app.interactive  # (the pipeline asks only then: services/calls.py _confirm)
    pipeline = services.open_calls(
        catalog,
        profile,
        command=command,
        caller=caller,
        named_as=app.profile,
        interactive=interactive,
        assume_yes=yes,
        confirm=cli.confirm_call if interactive else None,
        conversation_id=conversation_id,
        use_cache=use_cache,
        clearance=clearance,
    )
    ctx.call_on_close(pipeline.close)
    return pipeline


def tool_resolver(ctx: click.Context, catalog: Catalog, loaded: LoadedProfile | None = None) -> ToolResolver:
    """SERVER.TOOL, or a bare tool name, to (server, tool) for this command (services.tools).
    `loaded`: the profile, so a name of one of its disabled servers says so."""

    disabled = [n for n, s in loaded.profile.servers.items() if not s.enabled] if loaded is not None else []
    return services.ToolResolver(catalog, app_of(ctx).profile, disabled)


def _warn(ctx: click.Context, text: str) -> None:
    """A notice from the protocol layer (server state lost): stderr now, and kept in the App
    so a command can put it into its JSON output for scripts that do not read stderr."""
    warn(text)
    app_of(ctx).warnings.append(text)


def warnings(ctx: click.Context) -> dict[str, Any]:
    """{"warnings": [...]} for a command's JSON output, or nothing."""
    found = app_of(ctx).warnings
    return {"warnings": list(found)} if found else {}


def _short(value: object, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _progress_line(params: Mapping[str, object]) -> None:
    total = params.get("total")
    done = params.get("progress")
    message = params.get("message") or ""
    amount = f"{done}/{total}" if total else f"{done}"
    status_line(f"[progress] {amount} {message}")


def _progress_note(params: Mapping[str, object]) -> None:
    """Progress without a terminal (-v): one plain line per notification."""
    total, done = params.get("total"), params.get("progress")
    note(f"[progress] {f'{done}/{total}' if total else done} {params.get('message') or ''}".rstrip())

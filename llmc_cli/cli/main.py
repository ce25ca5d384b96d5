"""The `llmc` root command. Subcommands load lazily so `llmc --help` stays fast."""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from llmc_cli import forward_refs_compiled_when_used

with forward_refs_compiled_when_used():  # click's TypedDicts and TypeVar bounds: llmc_cli/__init__.py
    import click

from llmc_cli import __version__, interrupts
from llmc_cli.errors import ConfigError, ExitCode, LlmcError, UsageError, did_you_mean

# name -> ("module:attribute", one-line help). A command's module (and what it imports) loads
# only when that command runs; `llmc --help` reads the help text from here.
COMMANDS: dict[str, tuple[str, str]] = {
    "ask": ("llmc_cli.cli.ask:ask", "Ask an LLM; it uses the profile's tools under its policy."),
    "completion": ("llmc_cli.cli.completion:completion", "Print the shell completion script: bash, zsh or fish."),
    "conversations": ("llmc_cli.cli.conversations:conversations", "List, show and remove the conversations ask saved."),
    "tools": ("llmc_cli.cli.tools:tools", "List, translate, export, lint and pin tool manifests."),
    "call": ("llmc_cli.cli.call:call", "Call one tool: llmc call SERVER.TOOL key=value ..."),
    "cache": ("llmc_cli.cli.cache:cache", "Clear the cached tool results ([cache]): llmc cache clear [--server S]."),
    "resources": ("llmc_cli.cli.resources:resources", "List and read server resources."),
    "prompts": ("llmc_cli.cli.resources:prompts", "List and get server prompts."),
    "policy": ("llmc_cli.cli.policy:policy", "Explain and pre-approve policy decisions."),
    "audit": ("llmc_cli.cli.audit:audit", "Read and verify the audit trail of every tool invocation."),
    "ping": ("llmc_cli.cli.resources:ping", "Check that servers answer."),
    "servers": (
        "llmc_cli.cli.servers:servers",
        "Add, list, show, remove, import the servers of a profile; install the gateway in a host.",
    ),
    "profiles": ("llmc_cli.cli.profiles:profiles", "List, show and initialise profiles."),
    "auth": ("llmc_cli.cli.auth:auth", "Log in to remote servers (OAuth); show and remove stored tokens."),
    "serve": (
        "llmc_cli.cli.serve:serve",
        "The gateway: a profile's servers as one MCP server (-p PROFILE [--http ADDR]); serve workspace: the built-in server.",
    ),
    "state": ("llmc_cli.cli.state:state", "Shared state in PostgreSQL: llmc state migrate."),
    "session": ("llmc_cli.cli.session:session", "Keep servers running between commands: start, list, stop, forget."),
}

EXIT_CODES_HELP = """\b
Exit codes:
  0 ok            1 tool error / failed check   2 usage
  3 config        4 denied by policy            5 connection / transport
  6 protocol      7 timeout                     8 LLM provider
  9 auth          10 tool manifest drift        130 interrupted (SIGINT)
  143 terminated (SIGTERM, SIGHUP)
"""

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


class Unwinding(BaseException):
    """Ctrl-C, SIGTERM or SIGHUP (a KeyboardInterrupt) leaving a command, carried past click's
    main, which would print an empty line before its Abort: in a pipe or a log, stderr is then
    one line, `llmc: interrupted` (on a terminal the line break after ^C is ours to print)."""


class RegistryGroup(click.Group):
    """A group whose commands load when they run: `registry` maps each name to "module:attribute"
    (the root: COMMANDS; `tools`: cli/tools.py's TOOLS, so `tools list` builds no option of the
    other six)."""

    def __init__(self, *args: Any, registry: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.registry = registry

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.registry))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.registry:
            module, attr = self.registry[name].split(":")
            command: click.Command = getattr(importlib.import_module(module), attr)
            _started()
            _accept_global_options(command)
            return command
        return super().get_command(ctx, name)


class ExamplesContext(click.Context):
    """A subcommand's context (_accept_global_options): its help ends with the command's examples
    (cli/examples.py), put there when the help is made (--help, a group without its subcommand),
    so that a command that only runs never loads them (issue 34; the root's are LazyGroup's)."""

    def get_help(self) -> str:
        from llmc_cli.cli.examples import attach_examples  # only for help

        names: list[str] = []
        ctx: click.Context = self
        while ctx.parent is not None:
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        attach_examples(self.command, " ".join(reversed(names)))
        return super().get_help()


class LazyGroup(RegistryGroup):
    """The root: its --help reads each command's line from COMMANDS (loading none of them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, registry={name: where for name, (where, _) in COMMANDS.items()}, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Unwinding from exc

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            raise click.UsageError(f"No such command {name!r}{did_you_mean(name, self.list_commands(ctx))}.", ctx)
        return super().resolve_command(ctx, args)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from llmc_cli.cli.examples import block  # only for help (as ExamplesContext)

        super().format_epilog(ctx, formatter)
        formatter.write_paragraph()  # llmc's own examples close its --help, as every command's
        formatter.write_text(block(""))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _started() -> None:
    """The command's module is loaded: the collector that the `llmc` entry (llmc_cli/__main__.py)
    kept off during start-up runs again, past everything alive now (frozen). In a process that
    did not start that way (tests in-process) the collector is on and this does nothing."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    from llmc_cli.cli.complete import complete_profiles  # only when the shell asks

    return complete_profiles(ctx, param, incomplete)


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--version as click.version_option(__version__, prog_name="llmc") prints it."""
    if value and not ctx.resilient_parsing:
        click.echo(f"llmc, version {__version__}", color=ctx.color)
        ctx.exit()


def _show_help(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """-h/--help as click.decorators.help_option shows it."""
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


HELP_OPTION_NAMES = ["-h", "--help"]


def _help_option(command: click.Command) -> None:
    """The command's -h/--help, made as click makes it (Command.get_help_option) but with its
    text as it is: click passes it through gettext, and gettext's first lookup imports `locale`
    (4.3 M instructions, 1.5% of a call through a keeper; --version and --cwd's type avoid it
    too). It goes into click's own cache of the option (8.1.8 on): a click without that cache
    makes its own option, as before. click's messages are not translated for llmc either way."""
    if command.add_help_option and getattr(command, "_help_option", False) is None:
        storage = getattr(click.core, "_HELP_OPTION_STORAGE_NAME", "help")
        command._help_option = click.Option(
            [*HELP_OPTION_NAMES, storage],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            help="Show this message and exit.",
            callback=_show_help,
        )


@click.group(cls=LazyGroup, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": HELP_OPTION_NAMES})
@click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version, help="Show the version and exit."
)
@click.option(
    "--profile",
    "-p",
    envvar="LLMC_PROFILE",
    metavar="NAME|PATH",
    shell_complete=_complete_profiles,
    help="Profile to use (default: 'default', else the built-in read-only workspace).",
)
@click.option("-v", "--verbose", count=True, help="Show server stderr and log messages on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings on stderr (errors still show).")
@click.option("--otel", is_flag=True, help="Export OpenTelemetry traces and metrics (OTEL_* variables; also LLMC_OTEL=1).")
@click.pass_context
def cli(ctx: click.Context, profile: str | None, verbose: int, quiet: bool, otel: bool) -> None:
    """Let any LLM use the tools of any MCP server: under a policy, with an audit trail.

    stdout carries only data (JSON; a listing on a terminal is a table, --format and
    LLMC_FORMAT choose); messages for people go to stderr.
    -p, -v and -q may also follow the subcommand (llmc tools list -p ops -v).
    """
    # The application layer (the App, rendering, telemetry) loads here, when a command runs:
    # `llmc --help` and `llmc --version` never reach this callback.
    from llmc_cli.cli import context

    context.start_app(ctx, profile=profile, verbose=verbose, quiet=quiet, otel=otel)


_help_option(cli)


def _set_global(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """-p/-v/-q given after the subcommand: the same as before it (a later -p wins, -v adds up)."""
    if value is None or value is False or value == 0:
        return
    from llmc_cli.cli import context

    context.set_global(ctx, param.name or "", value)


def _accept_global_options(command: click.Command) -> None:
    """Give a subcommand (and every command below it) the root's -p, -v and -q, unless it has
    an option of that name itself (`serve -p`, `servers install -p` mean the same profile and
    keep their own). Done once per command object, when the command is first looked up."""
    if getattr(command, "_llmc_globals", False):
        return
    command._llmc_globals = True  # type: ignore[attr-defined]
    command.context_class = ExamplesContext
    taken = {opt for p in command.params for opt in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
    extra = [
        click.Option(
            ["--profile", "-p", "global_profile"],
            metavar="NAME|PATH",
            expose_value=False,
            callback=_set_global,
            help="Profile to use (as `llmc -p`).",
            shell_complete=_complete_profiles,
        ),
        click.Option(
            ["-v", "--verbose", "global_verbose"], count=True, expose_value=False, callback=_set_global, help="As `llmc -v`."
        ),
        click.Option(
            ["-q", "--quiet", "global_quiet"], is_flag=True, expose_value=False, callback=_set_global, help="As `llmc -q`."
        ),
    ]
    command.params.extend(o for o in extra if not taken & set(o.opts))
    _help_option(command)
    for sub in getattr(command, "commands", {}).values():
        _accept_global_options(sub)


def _require_utf8(args: list[str]) -> None:
    """Bytes in argv that are not UTF-8 arrive as lone surrogates and would fail wherever the text
    is encoded again (a request body, a file, the audit log): refuse them here, for every option."""

    for position, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            raise UsageError(f"argument {position} is not UTF-8 text (character {exc.start + 1}): {shown[:80]}") from None


def main(argv: list[str] | None = None) -> None:
    """Entry point: every LlmcError becomes one line on stderr and its exit code."""

    interrupts.install()
    code: int | str | None = 0
    try:
        try:
            _run_command(argv)
        except SystemExit as exc:
            code = exc.code
            raise
        finally:
            _record_abandoned()
            _end_telemetry(code)
    except SystemExit:
        _flush_stdout()
        interrupts.leaving()
        raise
    _flush_stdout()
    interrupts.leaving()


def _end_telemetry(code: int | str | None) -> None:
    """Export what telemetry holds, within its bounded time; a collector that is down is a
    warning, never a different exit code. `code`: the command's exit status, for its root span
    (an exception other than SystemExit leaves it 0 here: it is a crash the interpreter reports)."""
    telemetry = sys.modules.get("llmc_cli.telemetry")
    if telemetry is None:
        return
    warning = telemetry.shutdown(code if isinstance(code, int) else 0 if code is None else 1)
    if warning:
        _tell(warning)


def _tell(what: LlmcError | str) -> None:
    """An error (its one line) or a warning on stderr, through the rendering module, which loads
    only when there is something to say (not for --help)."""
    from llmc_cli.cli import output

    if isinstance(what, LlmcError):
        output.report_error(what)
    else:
        output.warn(what)


def _flush_stdout() -> None:
    """Flush now, not at interpreter exit, where a reader that went away (`llmc ... | head -1`)
    would turn into 'Exception ignored ... BrokenPipeError' and exit status 120."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_gone()
    except OSError as exc:
        if not _output_failed(exc):
            raise


# What a write to stdout fails with when its file cannot take more: a full disk (/dev/full), a
# quota, a file-size limit (`ulimit -f`: CPython ignores SIGXFSZ, so the write fails), an I/O error.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _output_failed(exc: OSError) -> bool:
    """stdout could not be written (a write error with no file name: files llmc writes itself
    fail as ConfigError naming them): one line on stderr and exit 3, as for a full state
    directory, instead of a traceback. False for any other OSError, which stays a crash."""
    if exc.errno not in OUTPUT_ERRNOS or exc.filename is not None:
        return False
    _reader_gone()  # what is still buffered can go nowhere either: the interpreter's flush must not fail again
    _tell(ConfigError(f"cannot write the output (stdout): {exc.strerror or exc}; free some space or send stdout elsewhere"))
    sys.exit(ExitCode.CONFIG)


def _reader_gone() -> None:
    """stdout's reader went away: nothing left to say to it. Point stdout at /dev/null so the
    interpreter's own final flush has nowhere to fail."""

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _run_command(argv: list[str] | None) -> None:
    try:
        _require_utf8(sys.argv[1:] if argv is None else argv)
        stdout = sys.stdout
        try:
            code = cli.main(args=argv, prog_name="llmc", standalone_mode=False)
        except SystemExit as exc:
            # Only click's EPIPE exit (1): `serve workspace` points sys.stdout at stderr on
            # purpose and leaves by SystemExit(143) on SIGTERM, which must keep its code.
            if exc.code == 1 and sys.stdout is not stdout:
                # Click met EPIPE on stdout, wrapped the streams and exits 1: the reader went
                # away (`llmc ... | head -c1`), which is no failure of ours.
                sys.stdout = stdout
                raise BrokenPipeError from None
            raise
        if isinstance(code, int) and code:  # ctx.exit(N) in a command
            sys.exit(code)
    except LlmcError as exc:
        _tell(exc)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, Unwinding):
        _interrupted()
    except click.ClickException as exc:
        if isinstance(exc, click.MissingParameter):
            _missing(exc)
        else:
            exc.show()
        sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code)
    except BrokenPipeError:
        # `llmc ... | head`: the reader went away; nothing left to say, and that is no failure.
        _reader_gone()
        sys.exit(ExitCode.OK)
    except OSError as exc:
        if not _output_failed(exc):
            raise


def _missing(exc: click.MissingParameter) -> None:
    """A missing option or argument in one line: which, its choices, where the help is."""
    param, ctx = exc.param, exc.ctx
    hint = exc.param_hint if isinstance(exc.param_hint, str) else ""
    if param is not None and ctx is not None and not hint:
        hint = param.get_error_hint(ctx)
    kind = "argument" if isinstance(param, click.Argument) else "option"
    choices = getattr(param.type, "choices", None) if param is not None else None
    where = ctx.command_path if ctx is not None else "llmc"
    line = f"{where}: Missing {kind} {hint}" + (f" (one of: {', '.join(map(str, choices))})" if choices else "")
    click.echo(f"{line}; see '{where} --help'", err=True)


def _record_abandoned() -> None:
    """Calls still running when llmc exits anyway (a model's call past `ask --total-timeout`, a
    gateway stopped by a signal) get an `abandoned` outcome: no decision stays without one."""
    open_calls = _open_calls()
    if open_calls is None:
        return
    try:
        open_calls.interrupt_all("llmc exited before the call finished", outcome="abandoned")
    except LlmcError as exc:
        _tell(exc)


def _open_calls() -> Any:
    """The registry of calls decided and not finished (services.OPEN_CALLS), if this process
    loaded it: a call registers there, so without services/calls.py there is none to close. Not
    through the services package, whose lazy name would import calls.py (and the audit and
    inspect modules under it, ~2 ms) as a `tools list` exits, to find nothing open."""
    calls = sys.modules.get("llmc_cli.services.calls")
    return None if calls is None else calls.OPEN_CALLS


def _interrupted() -> None:
    """Ctrl-C, SIGTERM or SIGHUP: requests in flight were cancelled where they waited or when
    their session closed on the way out; record `interrupted` for every call decided and not
    finished, stop the servers we started (their own process groups get no signal from the
    terminal or from whoever signalled us), then exit 130 (SIGINT) or 143 (SIGTERM, SIGHUP)."""

    code = interrupts.exit_code(ExitCode.INTERRUPTED)
    reason = "interrupted" if code == ExitCode.INTERRUPTED else "terminated"
    open_calls = _open_calls()
    if open_calls is not None:
        try:
            open_calls.interrupt_all(f"{reason} ({interrupts.signal_name()})")
        except LlmcError as exc:
            _tell(exc)
    stdio = sys.modules.get("llmc_cli.mcp.transports.stdio")
    if stdio is not None:
        stdio.StdioTransport.close_all()
    try:
        # after the ^C a terminal echoed, on a line of its own; nothing else anywhere else
        click.echo(("\n" if sys.stderr.isatty() else "") + f"llmc: {reason}", err=True)
    except OSError:
        pass  # SIGHUP: the terminal may be gone
    sys.exit(code)

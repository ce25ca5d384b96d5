"""Which servers a command talks to: an ad-hoc `--stdio`/`--url` target, or the profile's servers."""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from llmc_cli import config
from llmc_cli.errors import UsageError
from llmc_cli.model import ServerSpec, dataclass

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


if TYPE_CHECKING:
    _ParamType = click.ParamType[str, str]  # generic from click 8.2 on
else:
    _ParamType = click.ParamType


class LocalPath(_ParamType):
    """click.Path(file_okay=, dir_okay=, allow_dash=) as llmc's options use it (the path need not
    exist; one that does must be of the right kind and readable): the same checks, messages,
    metavar and completion, without click.Path's constructor's gettext lookup of its name,
    which imports `locale` on every command that defines one (4.3 M instructions: see
    cli/main.py, _help_option)."""

    def __init__(self, *, file_okay: bool = True, dir_okay: bool = True, allow_dash: bool = False) -> None:
        self.file_okay, self.dir_okay, self.allow_dash = file_okay, dir_okay, allow_dash
        self.name = "file" if not dir_okay else "directory" if not file_okay else "path"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if self.file_okay and self.allow_dash and value == "-":
            return value
        try:
            st = os.stat(value)
        except OSError:
            return value  # need not exist yet
        shown = f"{self.name.title()} {click.format_filename(value)!r}"
        if not self.file_okay and stat.S_ISREG(st.st_mode):
            self.fail(f"{shown} is a file.", param, ctx)
        if not self.dir_okay and stat.S_ISDIR(st.st_mode):
            self.fail(f"{shown} is a directory.", param, ctx)
        if not os.access(value, os.R_OK):
            self.fail(f"{shown} is not readable.", param, ctx)
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        made = click.Path(file_okay=self.file_okay, dir_okay=self.dir_okay, allow_dash=self.allow_dash)
        return made.shell_complete(ctx, param, incomplete)


DIRECTORY = LocalPath(file_okay=False)

ADHOC_NAME = "server"  # when nothing better can be told from the command or the URL
_RUNNERS = {
    "npx",
    "bunx",
    "pnpx",
    "uvx",
    "pipx",
    "uv",
    "bun",
    "deno",
    "node",
    "nodejs",
    "python",
    "python3",
    "pypy",
    "pypy3",
    "ruby",
    "php",
    "java",
    "env",
    "docker",
    "podman",
}
_GENERIC = {"index", "main", "server", "cli", "dist", "build", "lib", "src", "bin", "out", "__main__"}
_RUNNER_OPTIONS_WITH_VALUE = {
    "-p",
    "--package",
    "--from",
    "--with",
    "--python",
    "-c",
    "--cwd",
    "--spec",
    "--index-url",
    "--jar",
    "-cp",
    "-classpath",
    "-e",
    "--env",
    "-v",
    "--volume",
    "--name",
    "--network",
    "-w",
    "--workdir",
    "-u",
    "--user",
    "--mount",
    "--env-file",
    "--entrypoint",
}


@dataclass(frozen=True)
class Target:
    """The servers a command talks to, as its target options gave them (one typed value instead of
    ten keyword arguments): the profile's (`servers`: only these), an ad-hoc one (`--stdio` or
    `--url` with their settings), or those a session keeper holds (`session`)."""

    servers: tuple[str, ...] = ()
    stdio: str | None = None
    env: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[str, ...] = ()
    transport: str = "auto"
    timeout: float | None = None
    connect_timeout: float | None = None
    elicit: str | None = None  # prompt | accept-defaults | decline; None: prompt on a terminal, else decline
    session: str | None = None

    @property
    def is_adhoc(self) -> bool:
        return bool(self.stdio or self.url)

    def adhoc_spec(self) -> ServerSpec | None:
        """The ad-hoc server (UsageError for contradictory options), or None for the profile's."""
        return adhoc_spec(self.stdio, self.url, self.env, self.cwd, self.headers, self.transport, self.timeout)


TARGET_FIELDS = tuple(Target.__dataclass_fields__)


def _on_tab(name: str) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    """A shell_complete callback running cli/complete.py's `name`: that module (profiles, the
    tool-name cache, sessions) loads only when the shell asks, never when a command runs."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        from llmc_cli.cli import complete as completers

        found: list[CompletionItem] = getattr(completers, name)(ctx, param, incomplete)
        return found

    return complete


_complete_servers = _on_tab("complete_servers")
shell_complete_tools = _on_tab("complete_tools")  # SERVER.TOOL for `call` and `tools show`
complete_sessions = _on_tab("complete_sessions")


def target_options(func: Callable[..., object]) -> Callable[..., object]:
    """Options shared by every command that talks to servers; the command gets them as one
    `target: Target` keyword argument."""
    return _options(func, session=True)


def server_options(func: Callable[..., object]) -> Callable[..., object]:
    """Which servers to start, for `session start` (which is no place for --session)."""
    return _options(func, session=False)


def _options(func: Callable[..., object], session: bool) -> Callable[..., object]:
    options = [
        click.option(
            "-s",
            "--server",
            "servers",
            multiple=True,
            metavar="NAME",
            shell_complete=_complete_servers,
            help="Only these servers of the profile (repeatable).",
        ),
        click.option("--stdio", metavar="'COMMAND ARGS'", help="Ad-hoc stdio server (shell-split)."),
        click.option("--env", "env", multiple=True, metavar="K=V", help="Environment for --stdio (repeatable; ${VAR} expands)."),
        click.option("--cwd", type=DIRECTORY, help="Working directory for --stdio."),
        click.option("--url", metavar="URL", help="Ad-hoc remote server (Streamable HTTP or HTTP+SSE)."),
        click.option(
            "--header",
            "headers",
            multiple=True,
            metavar="'K: V'",
            help="HTTP header for --url (repeatable; ${VAR} expands from the environment).",
        ),
        click.option(
            "--transport",
            type=click.Choice(["auto", "http", "sse"]),
            default="auto",
            show_default=True,
            help="Remote transport for --url.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0.1),
            metavar="SECONDS",
            help="Per-request timeout (default: the server's, else 60).",
        ),
        click.option(
            "--connect-timeout",
            type=click.FloatRange(min=0.1),
            metavar="SECONDS",
            help="Bound of starting and connecting a server (the handshake), apart from --timeout "
            "(default: the server's connect_timeout, else 60 or --timeout when longer).",
        ),
        click.option(
            "--elicit",
            type=click.Choice(["prompt", "accept-defaults", "decline"]),
            default=None,
            help="How to answer server elicitation (default: prompt on a terminal, else decline).",
        ),
    ]
    if session:
        options.append(
            click.option(
                "--session",
                metavar="NAME",
                envvar="LLMC_SESSION",
                shell_complete=complete_sessions,
                help="Use the servers that session keeper NAME holds (see `llmc session start`) [env: LLMC_SESSION].",
            )
        )

    @functools.wraps(func)
    def with_target(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in TARGET_FIELDS if name in kwargs}
        return func(*args, target=Target(**given), **kwargs)

    command: Callable[..., object] = with_target
    for option in reversed(options):
        command = option(command)
    return command


def adhoc_spec(
    stdio: str | None,
    url: str | None,
    env: tuple[str, ...],
    cwd: str | None,
    headers: tuple[str, ...],
    transport: str,
    timeout: float | None,
) -> ServerSpec | None:

    if stdio and url:
        raise UsageError("give either --stdio or --url, not both")
    if not stdio and not url:
        if env or cwd or headers:
            raise UsageError("--env/--cwd need --stdio; --header needs --url")
        return None
    extra: dict[str, Any] = {"timeout": timeout} if timeout else {}
    if stdio:
        try:
            argv = split_command(stdio)
        except ValueError as exc:
            raise UsageError(f"--stdio: {exc}") from None
        if not argv:
            raise UsageError("--stdio needs a command")
        return ServerSpec(
            name=command_name(argv),
            command=tuple(argv),
            # ${VAR} expands as in --header and a profile's env: a secret stays out of the argv `ps` shows
            env={k: config.expand(v, f"--env {k}") for k, v in (_pair(e, "=", "--env") for e in env)},
            cwd=cwd,
            adhoc=True,
            **extra,
        )
    parsed = {k: config.expand(v, f"--header {k}") for k, v in (_pair(h, ":", "--header") for h in headers)}
    if not (url or "").startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https://: {url}")
    return ServerSpec(name=url_name(url or ""), url=url, headers=parsed, transport=transport, adhoc=True, **extra)


def split_command(text: str) -> list[str]:
    """shlex.split(text). A command of printable ASCII with no quote or backslash is only split
    at its spaces (shlex's other white space is not printable, and nothing else is special to it
    with comments off), so it is split here without loading shlex (0.9 M instructions, a third of
    a percent of a 1-call batch)."""
    if text.isascii() and text.isprintable() and not any(c in text for c in "'\"\\"):
        return text.split()
    import shlex  # quoting or escapes: shlex's rules

    return shlex.split(text)


def command_name(argv: list[str]) -> str:
    """An ad-hoc stdio server's name, from what it runs: the program's basename, or for a runner
    (npx, uvx, node, python, ...) the package, module or script it runs
    (`npx -y @modelcontextprotocol/server-filesystem /srv` -> server-filesystem,
    `python -m mcp_server_time` -> mcp_server_time, `python my_server.py` -> my_server)."""

    program = os.path.basename(argv[0])
    runner = _without_version(program)  # python3.12 -> python
    if runner not in _RUNNERS:
        return server_name(program)
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":  # python -m MODULE
            return server_name(next(args, "") or program)
        if arg in ("run", "exec", "x", "dlx") and runner in ("uv", "pipx", "bun", "deno", "pnpx", "npx", "docker", "podman"):
            continue
        if arg in _RUNNER_OPTIONS_WITH_VALUE:
            next(args, None)
            continue
        if arg.startswith("-") or (runner == "env" and "=" in arg):
            continue
        if runner == "env":
            return command_name([arg, *args])
        parts = [p for p in arg.split("/") if p]
        while len(parts) > 1 and _stem(parts[-1]) in _GENERIC:  # .../desktop-commander/dist/index.js
            parts.pop()
        name = _unversioned(parts[-1] if parts else arg)  # pkg@1.2.3, pkg==1.2
        name = _without_script_suffix(name)  # a script's stem
        return server_name(name or program)
    return server_name(program)


def url_name(url: str) -> str:
    """An ad-hoc remote server's name: its host and port (`127.0.0.1:8765` -> 127-0-0-1-8765,
    `https://mcp.example.com/mcp` -> mcp-example-com)."""

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return server_name(f"{parts.hostname or ''}{f'-{port}' if port else ''}")


def server_name(text: str) -> str:
    """`text` as a valid server name (no '.', '/', ':' or spaces: SERVER.TOOL and SERVER:URI must
    split where they should), else ADHOC_NAME."""

    out: list[str] = []
    in_run = False
    for char in text:  # each run of other characters becomes one "-"
        if char in _NAME_CHARS:
            out.append(char)
            in_run = False
        elif not in_run:
            out.append("-")
            in_run = True
    return "".join(out).strip("-") or ADHOC_NAME


# The names of an ad-hoc server are worked out with string methods, not regular expressions: each
# pattern compiled costs more than the whole name (~50-120 us each, four or five for a `python
# script.py` server, in every such command's start-up). Each helper is the re.sub or re.split it
# replaces, `$` included (it also matches before a final newline): tests/cli/test_adhoc_names.py.
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCRIPT_SUFFIXES = (".js", ".ts", ".mjs", ".mts", ".cjs", ".py", ".rb", ".php", ".jar")


def _ending(text: str) -> tuple[str, str]:
    """`text` less a final newline, and that newline (where `$` also matches)."""
    return (text[:-1], "\n") if text.endswith("\n") else (text, "")


def _without_version(program: str) -> str:
    """re.sub(r"[\\d.]+$", "", program): trailing digits (any decimal digit) and dots dropped."""
    body, newline = _ending(program)
    end = len(body)
    while end and (body[end - 1] == "." or body[end - 1].isdecimal()):
        end -= 1
    return body[:end] + newline


def _stem(part: str) -> str:
    """re.sub(r"\\.\\w+$", "", part): a last extension of word characters dropped."""
    body, newline = _ending(part)
    dot = body.rfind(".")
    if dot >= 0 and dot + 1 < len(body) and all(c.isalnum() or c == "_" for c in body[dot + 1 :]):
        body = body[:dot]
    return body + newline


def _unversioned(name: str) -> str:
    """re.split(r"(?<=.)@|==|>=|<=|~=", name)[0]: what precedes the first version mark."""
    cut = len(name)
    for mark in ("==", ">=", "<=", "~="):
        at = name.find(mark)
        if 0 <= at < cut:
            cut = at
    at = name.find("@", 1)
    while at > 0 and name[at - 1] == "\n":  # (?<=.): any character but a newline before it
        at = name.find("@", at + 1)
    return name[: min(cut, at) if at > 0 else cut]


def _without_script_suffix(name: str) -> str:
    """re.sub(r"\\.(m?[jt]s|c?js|py|rb|php|jar)$", "", name)."""
    body, newline = _ending(name)
    for suffix in _SCRIPT_SUFFIXES:
        if body.endswith(suffix):
            return body[: -len(suffix)] + newline
    return name


def _pair(text: str, sep: str, option: str) -> tuple[str, str]:
    key, found, value = text.partition(sep)
    if not found or not key.strip():
        raise UsageError(f"{option} expects K{sep}V, got {text!r}")
    return key.strip(), value.strip() if sep == ":" else value

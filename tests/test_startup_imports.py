"""Start-up budgets (issue 34): what `llmc --help`, `llmc tools list` and `llmc call` of the built-in
server may import. Each command runs in a fresh interpreter (the test process has imported far
more), and the modules it loaded are read from sys.modules as it exits.

The budget of each command is (a) modules it must never import: heavy or optional packages whose
laziness lives in named seams (transports, providers, validators, telemetry, the stores), and
(b) a ceiling on the number of modules, llmc's own and in all, at what the command loads today
(session 7: llmc's own exactly, two or three to spare in all), so a new import on a hot path is a
decision, not an accident. A call through a session keeper has its own budget in
tests/session/test_keeper_calls.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc

# Heavy or optional: no command below needs any of them.
NEVER = (
    "httpx",
    "httpx2",
    "httpcore",
    "pydantic",
    "jsonschema",  # valid arguments of a common schema are checked by the compiled subset
    "referencing",
    "psycopg",
    "opentelemetry",
    "openai",
    "anthropic",
    "google.genai",
    "mcp",  # the official SDK: tests and peers only
    "asyncio",
    "ssl",
    "jwt",
    "tomli_w",
    "tabulate",
    "llmc_cli.gateway",
    "llmc_cli.agent",
    "llmc_cli.providers",
    "llmc_cli.translate",
    "llmc_cli.telemetry.otel",
    "llmc_cli.store.postgres",
    "llmc_cli.keeper.daemon",
)


SPAWNING = ("subprocess", "signal", "select", "llmc_cli.server.processes", "llmc_cli.server.regex_worker")
# locale: imported by gettext's first lookup (click's help and version options and its Path type
# look their texts up; llmc gives them as they are: cli/main.py _help_option, targets.Directory)
UNTRANSLATED = ("locale",)
# loaded when first used (cli/lazy_stdlib.py): click's inspect (ast, dis, tokenize, linecache under
# it), datetime, gettext, uuid's platform, and the built-in servers' traceback
STAND_INS = ("inspect", "ast", "dis", "tokenize", "linecache", "datetime", "gettext", "platform", "traceback")

BUDGETS: dict[str, tuple[list[str], tuple[str, ...], int, int]] = {
    # name: (arguments, never imported besides NEVER, most llmc_cli modules, most modules in all)
    # cli/lazy_stdlib.py: the stand-ins of the standard modules below (inspect, gettext: --help uses them)
    "--help": (["--help"], ("llmc_cli.mcp", "llmc_cli.config", "llmc_cli.services", "concurrent", "logging", "json"), 7, 123),
    # subprocess, select, signal: the workspace server's process table and regex worker load
    # with the first process or regex search (llmc_cli/server/__init__.py)
    "tools list": (
        ["tools", "list"],
        (
            "concurrent",
            "logging",
            "llmc_cli.cli.batch",
            "llmc_cli.keeper.daemon",
            # the group's other commands: its registry (cli/tools.py TOOLS) loads them when they run
            "llmc_cli.cli.tool_views",
            "llmc_cli.cli.tool_manifests",
            # help's examples and a crashed server's telling line: only when needed (session 18)
            "llmc_cli.cli.examples",
            "llmc_cli.mcp.transports.crash_lines",
            *SPAWNING,
            *UNTRANSLATED,
            *STAND_INS,
        ),
        # mcp/tool_error.py: its own module, so a launched stdio call loads no mcp/server.py;
        # services/invocation.py: split from services/calls.py at the 500-line limit; 73 since
        # cli/prompt.py loads only where a person can be asked, 71: the built-in profile without
        # the profile cache and validation (session 18); 69: the examples and the crash lines
        # only when needed (session 18)
        69,
        181,
    ),
    # services/invocation.py and services/request.py: split from calls.py and pipeline.py at the
    # 500-line limit (start-up of a 1-call batch measured the same: 305-307 M instructions);
    # services/routes.py likewise from calls.py (session 16); services/reads.py loads with the
    # first read (session 16)
    "call": (
        ["call", "workspace.list_directory", "path=."],
        # cli/prompt.py: the questions, only where a person can answer them (cli/common.py);
        # the profile cache and validation: only for a profile's file (config/__init__.py)
        (
            "llmc_cli.cli.batch",
            "llmc_cli.services.reads",
            "llmc_cli.cli.prompt",
            "llmc_cli.config.profile_cache",
            "llmc_cli.config.validation",
            # help's examples, a crashed server's telling line, the rate windows (no rate
            # limit), argument rules' path globs (no argument rule): only when needed (session 18)
            "llmc_cli.cli.examples",
            "llmc_cli.mcp.transports.crash_lines",
            "llmc_cli.store.windows",
            "llmc_cli.policy.paths",
            *SPAWNING,
            *UNTRANSLATED,
            *STAND_INS,
        ),
        # 91: cli/starting.py, split from cli/common.py (session 17) so that `tools list` starts
        # its server before common's modules load; a call loads both (+0.5 M instructions); 90:
        # cli/prompt.py loads only where a person can be asked; 88: the built-in profile without
        # the profile cache and validation (session 18); 85: what only help, a crash, a rate
        # limit or an argument rule needs loads with it (session 18)
        85,
        206,
    ),
}

DUMP = """
import atexit, sys
out = sys.argv.pop(1)
# a stand-in of cli/lazy_stdlib.py is a module not loaded: only the real ones count
atexit.register(lambda: open(out, 'w').write('\\n'.join(sorted(k for k, v in sys.modules.items() if type(v).__name__ != 'StandIn'))))
sys.argv[0] = 'llmc'
from llmc_cli.cli.main import main
main()
"""


def loaded(arguments: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.txt"
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    for name in ("LLMC_PROFILE", "LLMC_OTEL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", DUMP, str(out), *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(out.read_text().split())


def under(modules: set[str], prefix: str) -> list[str]:
    return sorted(m for m in modules if m == prefix or m.startswith(prefix + "."))


@pytest.mark.parametrize("command", list(BUDGETS))
def test_a_command_imports_within_its_budget(command: str, tmp_path: Path) -> None:
    arguments, forbidden, most_llmc, most = BUDGETS[command]
    (tmp_path / "notes.txt").write_text("hello\n")
    modules = loaded(arguments, tmp_path)
    assert "llmc_cli.cli.main" in modules  # the command ran: an empty set would pass every check
    wrong = {prefix: under(modules, prefix)[:5] for prefix in (*NEVER, *forbidden) if under(modules, prefix)}
    assert wrong == {}, f"`llmc {command}` imported modules outside its budget"
    own = under(modules, "llmc_cli")
    assert len(own) <= most_llmc, f"`llmc {command}` imports {len(own)} llmc_cli modules (budget {most_llmc})"
    assert len(modules) <= most, f"`llmc {command}` imports {len(modules)} modules (budget {most})"


# Issue 34's goal: at most 150. A ratchet at today's count (it may fall, never rise). Where the
# laziness lives, so that a new import inside a function goes into one of these, or to a module top:
# - the command registry: cli/main.py loads a command's module when it runs (COMMANDS), the
#   application layer (cli/context.py: App, rendering, telemetry) when any command runs, and
#   cli/complete.py only when the shell asks (main._complete_profiles, targets._on_tab);
# - packages' lazy interfaces (llmc_cli.lazy_names): services.X loads X's module on first use;
# - transports: mcp/client.py picks stdio or an HTTP transport; the HTTP stack (httpx2, ssl,
#   http11) is imported at the top of mcp/transports/http_channel.py, which only they import;
# - providers: providers/base.make_provider imports one provider module, which imports its SDK;
# - validators: mcp/validation.py (jsonschema only for what the compiled subset cannot check);
# - telemetry: telemetry's setup (cli/common.start_telemetry) loads OpenTelemetry when asked for;
# - stores: PostgresState loads store/postgres/parts.py, and Database psycopg, only with a url;
# - guards: the DLP detectors with the first Scanner, the metadata scan (guard/scan.py) when used;
# - what only help, a failure or a profile's setting needs (session 18, 107 -> 113): the examples
#   (cli/main.py ExamplesContext, LazyGroup.format_epilog), a crashed server's telling line
#   (stdio.py _exit_message), the rate windows and the result cache (store/state.py FileState),
#   the path globs of argument rules (policy/rules.py _argument_refusal).
MOST_IMPORTS_IN_FUNCTIONS = 113


def test_imports_inside_functions_stay_few() -> None:
    """Imports in function bodies, TYPE_CHECKING blocks aside: each one a decision about start-up
    (a transport, a provider SDK, a validator, telemetry, a store, a command), not a habit."""

    package = Path(__file__).resolve().parent.parent / "llmc_cli"
    found = 0

    def count(node: ast.AST, in_function: bool) -> int:
        here = 0
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                here += in_function
            here += count(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
        return here

    for path in package.rglob("*.py"):
        found += count(ast.parse(path.read_text(encoding="utf-8")), False)
    assert 0 < found <= MOST_IMPORTS_IN_FUNCTIONS, f"{found} imports inside functions"


def test_the_llmc_entry_starts_without_the_collector_and_freezes_its_start_up() -> None:
    """llmc_cli/__main__.py (the `llmc` script's entry) imports with the cyclic GC off; the first
    command lookup freezes what start-up made and turns it on again. A process that imports
    cli.main itself (these tests, in-process) keeps its collector as it was, nothing frozen."""
    import gc

    from llmc_cli.cli import main as cli_main

    frozen = gc.get_freeze_count()
    cli_main._started()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    code = (
        "import gc\nimport llmc_cli.__main__\nassert not gc.isenabled()\n"
        "from llmc_cli.cli.main import cli\nimport click\n"
        "cli.get_command(click.Context(cli), 'call')\n"
        "assert gc.isenabled() and gc.get_freeze_count() > 10_000, gc.get_freeze_count()\nprint('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


OPENING = """
import gc, sys
if sys.argv.pop(1) == "entry":
    import llmc_cli.__main__
from llmc_cli.cli import common
from llmc_cli.cli.main import main
opened, seen = common._open_target, []
def observed(*args):
    seen.append(gc.isenabled())
    return opened(*args)
common._open_target = observed
try:
    main(["tools", "list", "--format", "json"])
finally:
    print(seen, gc.isenabled(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(("start", "expected"), [("entry", "[False] True True"), ("imported", "[True] True False")])
def test_the_collector_is_off_while_a_command_opens_its_target(start: str, expected: str, tmp_path: Path) -> None:
    """Through the `llmc` entry, a command opens its target (modules, servers) with the collector
    off, and runs with it on again, that start-up frozen too (cli/common.py open_target); a
    process that imported the CLI itself (tests in-process) keeps the collector on throughout."""
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    env.pop("LLMC_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-c", OPENING, start], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == expected, proc.stdout[-500:] + proc.stderr[-2000:]


def test_interrupts_handles_signals_without_the_signal_modules_enums() -> None:
    """interrupts.py uses _signal (what `signal` wraps, numbers without enums): the same handlers
    installed, the same names in messages and records, an ignored signal left ignored."""
    import signal

    from llmc_cli import interrupts

    assert {s: signal.Signals(s).name for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)} == interrupts.SIGNAL_NAMES
    assert str(interrupts.Interrupted(signal.SIGTERM)) == "SIGTERM" and interrupts.Interrupted(15).exit_code == 143
    code = (
        "import signal, sys\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "from llmc_cli import interrupts\ninterrupts.install()\n"
        "assert signal.getsignal(signal.SIGINT) is interrupts._handle is signal.getsignal(signal.SIGTERM)\n"
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
        "try:\n    signal.raise_signal(signal.SIGTERM)\nexcept interrupts.Interrupted as exc:\n"
        "    assert interrupts.signal_name() == 'SIGTERM' and exc.signum == 15 and interrupts.exit_code() == 143\n"
        "    print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_click_s_own_options_behave_as_click_makes_them(isolated_dirs: Path, tmp_path: Path) -> None:
    """-h/--help, --version and --cwd's directory type are llmc's (no gettext lookup, above), and
    say what click's say."""
    assert llmc("--version").stdout == "llmc, version 0.1.0\n"
    helped = llmc("call", "-h")
    assert helped.returncode == 0 and "  -h, --help" in helped.stdout and "Show this message and exit." in helped.stdout
    assert "--cwd DIRECTORY" in helped.stdout
    wrong = llmc("call", "--bogus")
    assert wrong.returncode == 2 and "Try 'llmc call --help' for help." in wrong.stderr, wrong.stderr
    afile = tmp_path / "f"
    afile.write_text("")
    refused = llmc("call", "--cwd", str(afile), "--stdio", "x", "t.echo")
    assert refused.returncode == 2 and f"Invalid value for '--cwd': Directory '{afile}' is a file." in refused.stderr


def test_a_call_of_a_launched_stdio_server_loads_no_thread_pool(tmp_path: Path) -> None:
    """The thread that starts sandboxed servers (mcp/transports/stdio.py _Spawner) is llmc's own:
    concurrent.futures imports logging, 35 M instructions of start-up."""
    server = f"{sys.executable} {Path(__file__).resolve().parent / 'peers' / 'sdk_server.py'}"
    modules = loaded(["call", "--yes", "--stdio", server, "echo", "message=hi"], tmp_path)
    assert "llmc_cli.mcp.transports.stdio" in modules  # it did launch the server
    assert not [m for m in ("concurrent", "concurrent.futures", "logging") if m in modules]
    # nor the built-in servers' framework (the jail's ToolError is mcp/tool_error.py's)
    assert not [m for m in ("llmc_cli.mcp.server", "llmc_cli.mcp.workers", "queue") if m in modules]


# Modules whose import may compile a pattern: those that every command of the path uses.
COMPILING_AT_IMPORT = {"llmc_cli.model", "llmc_cli.config.secrets"}
RECORD_COMPILES = """
import importlib, re, sys
compiled = set()
original = re._compile
def record(pattern, flags):
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "re":
        frame = frame.f_back
    if frame is not None and frame.f_code.co_name == "<module>":
        compiled.add(frame.f_globals.get("__name__", ""))
    return original(pattern, flags)
re._compile = record
for name in sys.argv[1:]:
    importlib.import_module(name)
print(" ".join(sorted(m for m in compiled if m.startswith("llmc_cli"))))
"""


def test_the_stdio_paths_compile_at_import_only_the_patterns_every_command_uses() -> None:
    """Compiling a regular expression is pure Python (0.1-0.9 ms each): the patterns of rare paths
    (a crashed server's stderr, a reply nested too deep, text that is not ASCII) are compiled
    when first used (llmc_cli.lazy_pattern), not by every `call --batch` and `tools list`."""
    from llmc_cli import lazy_pattern

    modules = [
        "llmc_cli.cli.main",
        "llmc_cli.cli.call",
        "llmc_cli.cli.batch",
        "llmc_cli.cli.tools",
        "llmc_cli.cli.output",
        "llmc_cli.mcp.jsonrpc",
        "llmc_cli.mcp.transports.stdio",
        "llmc_cli.catalog.pool",
        "llmc_cli.services.batch",
        "llmc_cli.services.state",
    ]
    proc = subprocess.run([sys.executable, "-c", RECORD_COMPILES, *modules], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(proc.stdout.split()) <= COMPILING_AT_IMPORT
    # ...and a lazy one finds what the compiled one finds
    lazy, eager = lazy_pattern("[\ud800-\udfff]"), __import__("re").compile("[\ud800-\udfff]")
    for text in ("plain", "a\ud800b", "\udfff", "é\u2028"):
        assert (lazy.search(text) is None) == (eager.search(text) is None)
        assert lazy.sub("\ufffd", text) == eager.sub("\ufffd", text)
    assert lazy.pattern == eager.pattern and lazy.flags == eager.flags


def test_a_listing_of_a_launched_stdio_server_loads_no_call_machinery(tmp_path: Path) -> None:
    """`tools list --stdio` decides no call: the call registry (services/calls.py, and the audit
    and inspect modules under it) stays unloaded, at exit too (cli/main.py _open_calls), and so
    does the read judge (services/reads.py) that only resources and prompts listings use."""
    server = f"{sys.executable} {Path(__file__).resolve().parent / 'peers' / 'sdk_server.py'}"
    modules = loaded(["tools", "list", "--stdio", server], tmp_path)
    assert "llmc_cli.mcp.transports.stdio" in modules  # it did launch the server
    unneeded = ("llmc_cli.services.calls", "llmc_cli.services.reads", "llmc_cli.services.inspect", "llmc_cli.audit")
    assert [m for m in unneeded if m in modules] == []

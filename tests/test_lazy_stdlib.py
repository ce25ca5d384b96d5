"""The stand-ins of cli/lazy_stdlib.py: standard modules that click, subprocess and the built-in
servers import and a command seldom uses, loaded when first used (issue 34). A batch and a
listing never load them; whoever uses them gets the real module's answers, `--help` the same
text; two threads touching one first at once load it once. Each check runs in a fresh
interpreter (this process imported the real modules long ago: install() leaves them alone)."""

from __future__ import annotations

import inspect
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import click
import pytest

from llmc_cli.cli import lazy_stdlib
from tests.helpers import sdk_server

DEFERRED = ("inspect", "datetime", "gettext", "platform", "locale", "signal", "traceback")
# what each stand-in keeps out of a command that does not use it
UNDER = ("ast", "dis", "tokenize", "linecache", "opcode")


def fresh(code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run `code` in a new interpreter; its stdout (it must exit 0)."""
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-3000:]
    return proc.stdout


RUN_AND_DUMP = """
import atexit, json, sys
out, names = sys.argv.pop(1), sys.argv.pop(1).split(",")
def dump():
    kinds = {n: type(sys.modules[n]).__name__ for n in names if n in sys.modules}
    open(out, "w").write(json.dumps(kinds))
atexit.register(dump)
sys.argv[0] = "llmc"
from llmc_cli.cli.main import main
main()
"""


@pytest.mark.parametrize("command", ["call --batch", "tools list"])
def test_a_batch_and_a_listing_of_a_launched_server_load_none_of_them(command: str, tmp_path: Path) -> None:
    """`llmc call --batch` and `llmc tools list` of a launched stdio server end with the stand-ins
    unloaded and none of the modules under them imported."""
    server = " ".join(sdk_server("sdk_server.py"))
    batch = tmp_path / "calls.jsonl"
    batch.write_text(json.dumps({"id": 0, "tool": "echo", "arguments": {"message": "hi"}}) + "\n")
    args = ["call", "--batch", str(batch), "--yes"] if command == "call --batch" else ["tools", "list", "--format", "json"]
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    env.pop("LLMC_PROFILE", None)
    names = ",".join(DEFERRED + UNDER)
    out = fresh(RUN_AND_DUMP, str(tmp_path / "kinds.json"), names, *args, "--stdio", server, cwd=tmp_path, env=env)
    assert "hi" in out if command == "call --batch" else json.loads(out)  # the command did its work
    kinds = json.loads((tmp_path / "kinds.json").read_text())
    assert kinds == dict.fromkeys(DEFERRED, "StandIn")


FIRST = "import inspect, datetime, gettext, platform, locale, signal, traceback\n"
HELP = "import sys\nsys.argv[0] = 'llmc'\nfrom llmc_cli.cli.main import main\nmain()\n"


@pytest.mark.parametrize("args", [["--help"], ["call", "--help"], ["tools", "list", "--help"], ["--version"], ["ask", "-h"]])
def test_help_is_the_same_as_with_the_real_modules(args: list[str], tmp_path: Path) -> None:
    """Help texts (click cleans every option's help with inspect.cleandoc and looks its own
    texts up with gettext) are the same as in a process that imported the real modules first."""
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "c"), "LLMC_STATE_DIR": str(tmp_path / "s"), "COLUMNS": "100"}
    deferred = fresh(HELP, *args, env=env)
    assert deferred == fresh(FIRST + HELP, *args, env=env) and deferred.strip()


BEHAVE = """
import sys, threading
import _datetime
from llmc_cli.cli import lazy_stdlib
StandIn = lazy_stdlib.StandIn
assert type(sys.modules["inspect"]) is StandIn and "ast" not in sys.modules

# what a stand-in answers before its module loads: the real module's answers
import inspect, datetime, platform, gettext
assert inspect.cleandoc("One line of help.") == "One line of help."
from datetime import datetime as dt, timezone
assert dt is _datetime.datetime and timezone is _datetime.timezone and datetime.UTC is _datetime.UTC
assert platform.system() in ("Linux", "Darwin", "Windows")
assert all(type(sys.modules[n]) is StandIn for n in ("inspect", "datetime", "platform", "gettext")), "loaded early"

# a dataclass without a docstring: the stdlib writes one with inspect.signature, through the stand-in
import dataclasses
@dataclasses.dataclass
class Point:
    x: int
    y: str = "a"
assert Point.__doc__ == "Point(x: int, y: str = 'a')", Point.__doc__
real = sys.modules["inspect"]
assert type(real) is not StandIn and real is not inspect and "ast" in sys.modules
assert inspect.signature is real.signature and inspect.cleandoc is real.cleandoc and inspect.Parameter is real.Parameter
from inspect import getsource, Parameter
assert Parameter is real.Parameter and isinstance(inspect.signature(lambda a: a).parameters["a"], Parameter)
assert inspect.cleandoc("  first\\n    second\\n") == "first\\nsecond" and "signature" in dir(inspect)

# datetime: its names are the C module's before and after it loads
assert datetime.__file__.endswith("datetime.py") and type(sys.modules["datetime"]) is not StandIn
assert all(getattr(sys.modules["datetime"], n) is getattr(_datetime, n) is getattr(datetime, n) for n in lazy_stdlib.DATETIME_NAMES)

# gettext's functions bound before it loads call the real ones
from gettext import gettext as g, ngettext as ng
assert g("Usage:") == sys.modules["gettext"].gettext("Usage:") and ng("a", "b", 2) == "b"

# platform.system() as platform's own, once platform is loaded
assert platform.machine() and type(sys.modules["platform"]) is not StandIn
assert lazy_stdlib._system() == sys.modules["platform"].system() == platform.system()

# two threads touching traceback first at once: one import, both see its function
import traceback
assert type(sys.modules["traceback"]) is StandIn
barrier, got, errors = threading.Barrier(8), [], []
def touch():
    try:
        barrier.wait(timeout=60)
        got.append(traceback.format_exception_only)
    except BaseException as exc:
        errors.append(exc)
threads = [threading.Thread(target=touch) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=60)
assert not errors and len(got) == 8, (errors, len(got))
assert {id(f) for f in got} == {id(sys.modules["traceback"].format_exception_only)}

# a module that fails to import stays a stand-in, and fails again the next time
sys.path.insert(0, sys.argv[1])
lazy_stdlib._served = lambda: {"broken_for_test": {}}
lazy_stdlib.install()
import broken_for_test
for _ in range(2):
    try:
        broken_for_test.anything
    except RuntimeError as exc:
        assert str(exc) == "broken on purpose"
    else:
        raise AssertionError("no error")
    assert type(sys.modules["broken_for_test"]) is StandIn
print("ok")
"""


def test_a_stand_in_gives_the_real_module_s_answers(tmp_path: Path) -> None:
    (tmp_path / "broken_for_test.py").write_text("raise RuntimeError('broken on purpose')\n")
    assert fresh(BEHAVE, str(tmp_path)).strip() == "ok"


def _helps(command: click.Command) -> list[str]:
    texts = [p.help for p in command.params if isinstance(p, click.Option) and p.help]
    if isinstance(command, click.Group):  # (a group's registry loads its commands when asked for)
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            texts += _helps(sub) if sub is not None else []
    return texts


def test_cleandoc_gives_inspect_s_answer_for_every_help_text() -> None:
    """The one-line texts the stand-in cleans itself (every option's help of llmc) and the ones it
    leaves to inspect come out as inspect.cleandoc makes them."""
    from llmc_cli.cli.main import COMMANDS, cli

    ctx = click.Context(cli)
    texts = [h for name in COMMANDS for h in _helps(cli.get_command(ctx, name) or cli)]
    texts += ["", "a", " a", "\ta", "a\tb", "a\nb", "a\n  b\n", "\fa", "a\f", "\x0ba", "é b", "\u2028a", "a  ", "\\b"]
    assert len(texts) > 200
    for text in texts:
        assert lazy_stdlib._cleandoc(text) == inspect.cleandoc(text), repr(text)


def test_platform_system_is_platform_s() -> None:
    assert lazy_stdlib._system() == platform.system()

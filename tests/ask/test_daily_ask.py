"""Issue 39, "The same on a terminal and in a pipe" and "ask remembers and tells": the real CLI,
the provider SDKs against the wire-level fakes, the SDK test server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import llmc, profile_file, sdk_server
from tests.terminal import Terminal


def write_profile(root: Path, api: str, base_url: str, extra: str = "") -> None:
    profile_file(
        root / "config",
        f"""
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]

[llm]
provider = "{api}"
model = "model-fake"
base_url = "{base_url}"
{extra}
""",
    )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_model_that_answers_nothing_exits_8_in_a_pipe(isolated_dirs: Path, api: str) -> None:
    with FakeLLM(api, [turn(api, text="")]) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        proc = llmc("ask", "hi", env={"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"})
    assert proc.returncode == 8, proc.stderr
    assert "answered nothing" in proc.stderr and proc.stdout == ""


@pytest.mark.e2e  # a pseudo-terminal: the reply streams
def test_a_model_that_answers_nothing_exits_8_on_a_terminal(isolated_dirs: Path) -> None:
    with FakeLLM("openai", [turn("openai", text="")]) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        with Terminal("ask", "hi", env={"OPENAI_API_KEY": "k"}) as term:
            code = term.wait()
    assert code == 8, term.screen


@pytest.mark.e2e  # stdout and stderr on one pseudo-terminal
def test_the_progress_line_is_cleared_before_stdout(isolated_dirs: Path) -> None:
    from tests.cli.test_output_modes import shown

    profile_file(
        isolated_dirs / "config", f'[servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{sdk_server("sdk_server.py")[1]}"]\n'
    )
    with Terminal("call", "sdk.slow", "seconds=1", stdout_on_terminal=True) as term:
        code = term.wait()
    assert code == 0, term.screen
    assert "[progress]" in term.screen  # it was shown...
    lines = shown(term.screen).splitlines()
    assert not any("[progress]" in line for line in lines), lines  # ...and is gone, the JSON on lines of its own
    assert lines[0] == "{" and json.loads("\n".join(lines))["tool"] == "slow"

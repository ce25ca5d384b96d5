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


@pytest.mark.e2e  # the npm reference servers: past 40 tools
def test_switching_to_tool_search_is_said_with_how_to_turn_it_off(isolated_dirs: Path) -> None:
    from tests.helpers import node_tool
    from tests.profiles.runner import toml_str

    data = isolated_dirs / "data"
    data.mkdir()
    servers = (
        f"[servers.everything]\ncommand = {toml_str(node_tool('mcp-server-everything'))}\n"
        f"[servers.fs]\ncommand = {toml_str(node_tool('mcp-server-filesystem'))}\nargs = [{toml_str(str(data))}]\n"
        f"[servers.memory]\ncommand = {toml_str(node_tool('mcp-server-memory'))}\n"
        '[servers.workspace]\nbuiltin = "workspace"\n'
    )
    for flags, said in (((), True), (("--no-tool-search",), False)):
        with FakeLLM("openai", [turn("openai", text="Hi.")]) as fake:
            profile_file(
                isolated_dirs / "config", servers + f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n'
            )
            proc = llmc("ask", "hi", *flags)
        assert proc.returncode == 0, proc.stderr
        notice = [line for line in proc.stderr.splitlines() if "tool search" in line]
        assert bool(notice) is said, proc.stderr
        if said:
            assert len(notice) == 1 and "--no-tool-search" in notice[0] and "tool_search = false" in notice[0]


def test_a_continued_conversation_keeps_provider_model_and_base_url(isolated_dirs: Path) -> None:
    profile_file(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n')
    with FakeLLM("openai", [turn("openai", text="First."), turn("openai", text="Second.")]) as fake:
        first = llmc("ask", "--provider", "openai", "--model", "local-model", "--base-url", fake.base_url, "hi")
        assert first.returncode == 0, first.stderr
        again = llmc("ask", "--continue", "last", "and then?")  # no OPENAI_API_KEY, no flags
        assert again.returncode == 0, again.stderr
        assert again.json()["answer"] == "Second."
        assert [r.body["model"] for r in fake.requests] == ["local-model", "local-model"]
    saved = json.loads(Path(again.json()["saved"]).read_text())
    assert (saved["provider"], saved["model"], saved["baseUrl"]) == ("openai", "local-model", fake.base_url)


def test_a_failed_first_turn_is_not_saved(isolated_dirs: Path) -> None:
    from tests.fakes.llm import openai_error

    refused = openai_error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")
    with FakeLLM("openai", [refused]) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        proc = llmc("ask", "hi", env={"OPENAI_API_KEY": "wrong"})
    assert proc.returncode == 8, proc.stderr  # the provider refused
    listed = llmc("conversations", "list")
    assert listed.returncode == 0 and listed.json()["conversations"] == [], listed.stdout
    assert not list((isolated_dirs / "state" / "conversations").glob("*.json"))


def test_the_text_protocol_reads_a_name_attribute_block(isolated_dirs: Path) -> None:
    from tests.fakes.llm import chat_reply

    block = chat_reply('Adding.\n<mcp:tool name="add">{"a": 2, "b": 3}</mcp:tool>')
    with FakeLLM("text", [block, turn("text", text="It is 5.")]) as fake:
        write_profile(isolated_dirs, "text", fake.base_url, '[policy.hints."sdk.add"]\nreadOnly = true')
        proc = llmc("ask", "2+3?", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    out = proc.json()
    assert out["answer"] == "It is 5."
    assert [(s["tool"], s["arguments"], s["outcome"]) for s in out["steps"]] == [("sdk.add", {"a": 2, "b": 3}, "ok")]

"""Saved conversations (`ask --save/--continue`, `llmc conversations list|show|rm`) and what `ask`
tells people on stderr without a terminal. The installed llmc, a real SDK server, a fake model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import llmc, profile_file, sdk_server

KEY = {"OPENAI_API_KEY": "test-key"}


def write_profile(root: Path, base_url: str, policy: str = "") -> None:
    profile_file(
        root / "config",
        f"""
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]

[llm]
provider = "openai"
model = "model-fake"
base_url = "{base_url}"

[policy]
{policy}
""",
    )


def conversations(*args: str) -> tuple[int, dict | list | None, str]:
    proc = llmc("conversations", *args)
    try:
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        data = None
    return proc.returncode, data, proc.stderr


@pytest.mark.parametrize("continue_as", ["triage", "last"])
def test_continue_saves_back_to_the_same_conversation(isolated_dirs, continue_as):
    script = [turn("openai", text=f"answer {n}") for n in range(3)]
    with FakeLLM("openai", script) as fake:
        write_profile(isolated_dirs, fake.base_url)
        assert llmc("ask", "one", "--save", "triage", env=KEY).returncode == 0
        for prompt in ("two", "three"):
            proc = llmc("ask", prompt, "--continue", continue_as, env=KEY)
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout)["saved"].endswith("/triage.json")
    # the model saw the whole history each time, and every turn is in the one saved file
    assert [m.get("content") for m in fake.requests[2].body["messages"]][-5:] == ["one", "answer 0", "two", "answer 1", "three"]
    code, listed, _ = conversations("list")
    assert code == 0
    assert [(c["name"], c["turns"], c["firstPrompt"]) for c in listed["conversations"]] == [("triage", 3, "one")]
    code, shown, _ = conversations("show", "triage")
    assert code == 0 and [run["prompt"] for run in shown["runs"]] == ["one", "two", "three"]
    assert shown["name"] == "triage" and shown["provider"] == "openai"


def test_save_under_a_new_name_keeps_the_old_one(isolated_dirs):
    with FakeLLM("openai", [turn("openai", text="a"), turn("openai", text="b")]) as fake:
        write_profile(isolated_dirs, fake.base_url)
        assert llmc("ask", "one", "--save", "first", env=KEY).returncode == 0
        assert llmc("ask", "two", "--continue", "first", "--save", "branch", env=KEY).returncode == 0
    _, listed, _ = conversations("list")
    assert {c["name"]: c["turns"] for c in listed["conversations"]} == {"first": 1, "branch": 2}


def test_list_table_show_and_rm(isolated_dirs):
    with FakeLLM("openai", [turn("openai", text="a"), turn("openai", text="b")]) as fake:
        write_profile(isolated_dirs, fake.base_url)
        assert llmc("ask", "first question", "--save", "one", env=KEY).returncode == 0
        assert llmc("ask", "second question", "--save", "two", env=KEY).returncode == 0
    table = llmc("conversations", "list", "--format", "table")
    assert table.returncode == 0 and "first question" in table.stdout and "two" in table.stdout
    code, removed, stderr = conversations("rm", "one")
    assert code == 0 and removed == {"removed": ["one"]} and "removed conversation one" in stderr
    _, listed, _ = conversations("list")
    assert [c["name"] for c in listed["conversations"]] == ["two"]


@pytest.mark.parametrize("args", [("show", "gone"), ("rm", "gone"), ("rm", "two", "gone"), ("show", "../x"), ("show", "last")])
def test_missing_or_bad_names_are_usage_errors_and_remove_nothing(isolated_dirs, args):
    (isolated_dirs / "state" / "conversations").mkdir(parents=True)
    if args != ("show", "last"):
        (isolated_dirs / "state" / "conversations" / "two.json").write_text(
            json.dumps({"id": "x", "provider": "openai", "messages": [], "runs": []})
        )
    code, _, stderr = conversations(*args)
    assert code == 2 and stderr.count("\n") == 1 and stderr.startswith("llmc: ")
    if args != ("show", "last"):
        assert (isolated_dirs / "state" / "conversations" / "two.json").exists()


def test_steps_on_stderr_with_v_and_a_denied_call_reported_without_a_terminal(isolated_dirs):
    script = [
        turn("openai", calls=[("c1", "echo", {"message": "hi"})]),
        turn("openai", calls=[("c2", "add", {"a": 1, "b": 2})]),
        turn("openai", text="done"),
    ]
    with FakeLLM("openai", script) as fake:
        write_profile(
            isolated_dirs,
            fake.base_url,
            'allow = ["sdk.echo", "sdk.add"]\nconfirm = ["sdk.add"]\n[policy.hints."sdk.echo"]\nreadOnly = true',
        )
        quiet = llmc("ask", "go", env=KEY)
    assert quiet.returncode == 0, quiet.stderr
    # no terminal, no -v: only the call the model was refused is reported
    assert "[step 1]" not in quiet.stderr
    assert re.search(r"^llmc: \[step 2\] sdk.add: denied \(\d+ ms\): llmc's policy denied this call", quiet.stderr, re.M)
    with FakeLLM("openai", script) as fake:
        write_profile(
            isolated_dirs,
            fake.base_url,
            'allow = ["sdk.echo", "sdk.add"]\nconfirm = ["sdk.add"]\n[policy.hints."sdk.echo"]\nreadOnly = true',
        )
        verbose = llmc("-v", "ask", "go", env=KEY)
    assert verbose.returncode == 0, verbose.stderr
    for line in (
        r"\[step 1\] asking the model\.\.\.",
        r"\[step 1\] running sdk\.echo",
        r"\[step 1\] sdk\.echo: ok \(\d+ ms\)$",
        r"\[step 2\] sdk\.add: denied \(\d+ ms\): llmc's policy denied this call",
        r"\[step 3\] asking the model",
    ):
        assert re.search("^" + line, verbose.stderr, re.M), (line, verbose.stderr)

"""`llmc ask` end to end: the installed llmc, a real SDK of each provider talking to a
wire-level fake of its API, real MCP servers, the profile's policy and the audit trail."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, anthropic_error
from tests.fakes.scripts import APIS, sent_results, turn
from tests.helpers import audit_trail, llmc, node_tool, profile_file, sdk_server

pytestmark = pytest.mark.e2e  # the npm reference server-filesystem

KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "text": "OPENAI_API_KEY",
}


@pytest.fixture
def logs(isolated_dirs: Path) -> Path:
    root = isolated_dirs / "logs"
    root.mkdir()
    for name, text, mtime in [
        ("app-1.log", "old: all fine\n", 1_700_000_000),
        ("app-2.log", "ERROR disk full on /var\n", 1_700_100_000),
        ("notes.txt", "not a log\n", 1_700_200_000),
    ]:
        (root / name).write_text(text)
        os.utime(root / name, (mtime, mtime))
    return root


def write_profile(isolated_dirs: Path, logs: Path, api: str, base_url: str, policy: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.fs]
command = "{node_tool("mcp-server-filesystem")}"
args = ["{logs}"]

[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]

[llm]
provider = "{api}"
model = "{"gemini-fake" if api == "gemini" else "model-fake"}"
base_url = "{base_url}"
max_steps = 5

[policy]
{policy}
""",
    )


@pytest.mark.parametrize("api", APIS)
def test_the_data_analyst_story(isolated_dirs, logs, api):
    """List the log directory, read the newest *.log, answer; both calls audited."""
    script = [
        # sdk.* is denied, so the model sees one server's tools, under their own names
        turn(api, calls=[("c1", "list_directory_with_sizes", {"path": str(logs), "sortBy": "name"})]),
        turn(api, calls=[("c2", "read_text_file", {"path": str(logs / "app-2.log")})]),
        turn(api, text="The newest log, app-2.log, says: ERROR disk full on /var."),
    ]
    with FakeLLM(api, script) as fake:
        write_profile(isolated_dirs, logs, api, fake.base_url, 'deny = ["sdk.*"]')
        proc = llmc("ask", "What's in the latest error log?", env={KEY_ENV[api]: "test-key"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["answer"].endswith("ERROR disk full on /var.") and out["stopReason"] == "end"
    assert [s["tool"] for s in out["steps"]] == ["fs.list_directory_with_sizes", "fs.read_text_file"]
    assert all(s["outcome"] == "ok" for s in out["steps"])
    assert "disk full" in sent_results(api, fake.requests[-1].body)[0]["text"]
    first = json.dumps(fake.requests[0].body)
    assert "read_text_file" in first and '"echo"' not in first  # the model never sees a denied tool
    audit = audit_trail(isolated_dirs / "state")
    outcomes = [(r["tool"], r["outcome"]) for r in audit if r["event"] == "outcome"]
    assert outcomes == [("list_directory_with_sizes", "ok"), ("read_text_file", "ok")]
    assert all(r["command"] == "ask" and r["conversation"] == out["conversation"] for r in audit)
    assert "test-key" not in proc.stdout + proc.stderr


def test_a_denied_call_goes_back_to_the_model_and_text_output(isolated_dirs, logs):
    script = [
        turn("anthropic", calls=[("t1", "fs_write_file", {"path": str(logs / "x.log"), "content": "x"})]),
        turn("anthropic", text="I may not write files here."),
    ]
    with FakeLLM("anthropic", script) as fake:
        write_profile(isolated_dirs, logs, "anthropic", fake.base_url)
        proc = llmc("ask", "-", "--text", env={"ANTHROPIC_API_KEY": "k"}, stdin="write a file please")
    assert proc.returncode == 0 and proc.stdout == "I may not write files here.\n"
    result = sent_results("anthropic", fake.requests[1].body)[0]
    assert result["is_error"] and "no terminal" in result["text"]
    assert not (logs / "x.log").exists()


def test_save_and_continue(isolated_dirs, logs):
    with FakeLLM("openai", [turn("openai", text="first"), turn("openai", text="second")]) as fake:
        write_profile(isolated_dirs, logs, "openai", fake.base_url)
        env = {"OPENAI_API_KEY": "k"}
        assert llmc("ask", "one", "--save", "chat", env=env).returncode == 0
        second = llmc("ask", "and two?", "--continue", "last", "--text", env=env)
    assert second.stdout == "second\n"
    contents = [m.get("content") for m in fake.requests[1].body["messages"]]
    assert contents[-3:] == ["one", "first", "and two?"]


def test_max_steps_and_provider_errors_have_their_exit_codes(isolated_dirs, logs):
    loop = [turn("openai", calls=[(f"c{i}", "sdk_echo", {"message": "again"})]) for i in range(2)]
    with FakeLLM("openai", loop) as fake:
        write_profile(isolated_dirs, logs, "openai", fake.base_url, '[policy.hints."sdk.echo"]\nreadOnly = true')
        proc = llmc("ask", "loop", "--max-steps", "2", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 1 and json.loads(proc.stdout)["stopReason"] == "max_steps"
    with FakeLLM("anthropic", [anthropic_error(401, "authentication_error", "invalid x-api-key")]) as fake:
        write_profile(isolated_dirs, logs, "anthropic", fake.base_url)
        proc = llmc("ask", "hi", env={"ANTHROPIC_API_KEY": "wrong-key"})
    assert proc.returncode == 8 and "invalid x-api-key" in proc.stderr and "wrong-key" not in proc.stderr


def test_missing_provider_or_key_is_a_clear_error(isolated_dirs, logs):
    write_profile(isolated_dirs, logs, "anthropic", "http://127.0.0.1:9")
    proc = llmc("ask", "hi")
    assert proc.returncode == 3 and "ANTHROPIC_API_KEY" in proc.stderr  # configuration (issue 39), not the provider

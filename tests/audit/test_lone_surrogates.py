"""Lone surrogates ("\\ud800" escapes without their pair) from a server's reply or in a model's
arguments: an error result for that call, recorded in the audit trail; a batch always finishes;
`ask` hands the error back to the model. Against a hostile stdio server (tests/peers/hostile_stdio.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import sent_results, turn
from tests.helpers import audit_trail, llmc, profile_file, sdk_server

# tool of the hostile server -> where its reply carries the lone surrogate
HOSTILE_TOOLS = ["text", "key", "low", "rpc_error"]


def write_profile(isolated_dirs: Path, extra: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.h]
command = "{sys.executable}"
args = ["{sdk_server("hostile_stdio.py")[1]}"]
{extra}
""",
    )


def audit_records(isolated_dirs: Path) -> list[dict]:
    return audit_trail(isolated_dirs / "state")


def assert_verified() -> None:
    proc = llmc("audit", "verify")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"], proc.stdout + proc.stderr


@pytest.mark.parametrize("tool", HOSTILE_TOOLS)
def test_a_reply_with_a_lone_surrogate_is_a_recorded_protocol_error(isolated_dirs, tool):
    write_profile(isolated_dirs)
    proc = llmc("call", f"h.{tool}", "message=x")
    assert proc.returncode == 6 and "lone surrogate" in proc.stderr and proc.stdout == ""
    outcomes = [r for r in audit_records(isolated_dirs) if r["event"] == "outcome"]
    assert [(r["tool"], r["outcome"]) for r in outcomes] == [(tool, "transport_error")]
    assert "lone surrogate" in outcomes[0]["error"]
    assert_verified()


@pytest.mark.parametrize(
    "arguments",
    [
        '{"message": "a\\ud800"}',
        '{"message": "\\udfff"}',
        '{"message": ["nested", {"deep": "\\udc80"}]}',
        '{"k\\ud800": "in a key"}',
    ],
)
def test_arguments_with_a_lone_surrogate_are_denied_and_recorded(isolated_dirs, arguments):
    write_profile(isolated_dirs)
    # --no-validate: the nested case does not fit echo's schema (exit 2 before any policy); a
    # model's arguments reach the policy unvalidated, and that is the path under test.
    proc = llmc("call", "h.echo", "--no-validate", "--json", arguments)
    assert proc.returncode == 4 and "lone surrogate" in proc.stderr
    [record] = audit_records(isolated_dirs)
    assert record["decision"] == "deny" and record["rule"] == "invalid_text"
    assert "\ufffd" in json.dumps(record["arguments"], ensure_ascii=False)  # shown, not dropped
    assert_verified()


def test_a_batch_with_lone_surrogates_always_finishes(isolated_dirs):
    write_profile(isolated_dirs)
    lines = [{"id": i, "tool": f"h.{tool}", "arguments": {"message": "x"}} for i, tool in enumerate(HOSTILE_TOOLS)]
    lines.insert(2, {"id": "bad-args", "tool": "h.echo", "arguments": {"message": "\ud800"}})
    lines.append({"id": "fine", "tool": "h.echo", "arguments": {"message": "fine"}})
    batch = "".join(json.dumps(line) + "\n" for line in lines)  # json.dumps escapes the surrogate
    proc = llmc("call", "--batch", "-", "--parallel", "4", stdin=batch, timeout=60)
    assert proc.returncode == 6, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["id"] for o in out] == [line["id"] for line in lines]
    assert out[-1]["content"][0]["text"] == "fine"
    assert {o["error"]["error"] for o in out[:-1]} == {"rpc_error", "denied"}
    records = audit_records(isolated_dirs)
    assert len([r for r in records if r["event"] == "outcome"]) == len(HOSTILE_TOOLS) + 1
    assert_verified()


@pytest.mark.parametrize("api", ["openai", "anthropic", "gemini"])
def test_ask_gives_the_error_back_to_the_model(isolated_dirs, api):
    script = [
        turn(api, calls=[("c1", "text", {"message": "x"}), ("c2", "echo", {"message": "a\ud800"})]),
        turn(api, text="Both calls failed."),
    ]
    with FakeLLM(api, script) as fake:
        write_profile(
            isolated_dirs,
            f"""
[llm]
provider = "{api}"
model = "{"gemini-fake" if api == "gemini" else "model-fake"}"
base_url = "{fake.base_url}"
""",
        )
        key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}[api]
        proc = llmc("ask", "try them", env={key: "test-key"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["answer"] == "Both calls failed."
    assert [s["outcome"] for s in out["steps"]] == ["failed", "denied"]
    results = sent_results(api, fake.requests[1].body)
    assert len(results) == 2 and all("lone surrogate" in r["text"] for r in results)
    outcomes = [
        (r["tool"], r.get("outcome") or r["decision"])
        for r in audit_records(isolated_dirs)
        if r["event"] == "outcome" or r["decision"] == "deny"
    ]
    assert sorted(outcomes) == [("echo", "deny"), ("text", "transport_error")]
    assert_verified()


@pytest.mark.parametrize("tool", ["deep", "deep_rpc_error", "deeper", "deeper_rpc_error"])
def test_a_reply_nested_too_deep_is_one_recorded_protocol_error(isolated_dirs, tool):
    """900 levels parse, but nothing walks them; 5,000 are past the parser's own limit, and the
    reply's id is found without it: either way the reply becomes an error reply for the call, at
    once (not a dropped line and a timeout)."""
    write_profile(isolated_dirs)
    proc = llmc("call", f"h.{tool}", "message=x", "--timeout", "10")
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.strip() == "llmc: h: tools/call failed: the reply is nested more than 128 levels deep (code -32603)"
    outcomes = [r for r in audit_records(isolated_dirs) if r["event"] == "outcome"]
    assert [(r["tool"], r["outcome"]) for r in outcomes] == [(tool, "transport_error")]
    assert_verified()


class _Unchecked:
    """A catalog whose one session hands results on as given (no transport of llmc's checks them):
    what the pipeline's own check of a result is for."""

    keeper = None
    specs: dict = {}  # noqa: RUF012 - read only

    def session(self, server):
        return self

    def call_tool(self, name, arguments, timeout=None, meta=None):
        return {"content": [{"type": "text", "text": "x\ud800"}]}

    def require_tool(self, server, name):
        from llmc_cli.model import Tool

        return Tool(server, name, {"type": "object"})


def test_a_result_with_a_lone_surrogate_that_reaches_the_pipeline_is_refused_by_name(isolated_dirs):
    from llmc_cli import services
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import Profile
    from llmc_cli.errors import ProtocolError
    from llmc_cli.model import ToolCall

    calls = services.open_calls(_Unchecked(), LoadedProfile("t", None, Profile()), command="call")  # type: ignore[arg-type]
    with pytest.raises(ProtocolError) as raised:
        calls.run(services.ToolRequest.of(ToolCall("s", "echo", {"message": "m"})))
    calls.close()
    assert raised.value.message == "s: the result of echo contains a lone surrogate (invalid Unicode text)"
    [outcome] = [r for r in audit_records(isolated_dirs) if r["event"] == "outcome"]
    assert (outcome["tool"], outcome["outcome"], outcome["error"]) == ("echo", "transport_error", raised.value.message)

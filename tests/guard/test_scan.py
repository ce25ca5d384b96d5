"""`llmc tools scan` through the real CLI: an `mcp` SDK server whose metadata carries each class of
attack (tests/peers/poisoned_tools.py) beside a clean library server, and the reference servers
(everything, filesystem, memory) and Desktop Commander as the clean control: nothing high."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llmc_cli.guard.scan import text_findings
from tests.helpers import desktop_commander, llmc, node_tool, profile_file, sdk_server
from tests.peers import poisoned_tools as peer


def poisoned_profile(isolated_dirs: Path) -> None:
    poison, library = sdk_server("poisoned_tools.py")[1], sdk_server("sdk_library.py")[1]
    profile_file(
        isolated_dirs / "config",
        f"[servers.poison]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(poison)}]\n"
        f"[servers.lib]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(library)}]\n",
    )


@pytest.mark.usefixtures("isolated_dirs")
def test_each_attack_class_is_a_high_finding(isolated_dirs: Path) -> None:
    poisoned_profile(isolated_dirs)
    proc = llmc("tools", "scan", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert "high-severity finding(s) in server metadata" in proc.stderr
    findings = proc.json()["findings"]
    high = {(f["tool"], f["rule"]) for f in findings if f["severity"] == "high" and f["server"] == "poison"}
    for tool, rule in peer.EXPECTED.items():
        assert (tool, rule) in high, (tool, rule, findings)
    assert (None, "model_instruction") in high  # the server's instructions
    assert all(f["tool"] != "clock" for f in findings)  # "IMPORTANT: always pass a timezone" is about itself
    assert all(f["server"] != "lib" for f in findings)  # the imitated server is not the imitation
    assert set(findings[0]) == {"server", "tool", "field", "rule", "severity", "excerpt"}
    by = {(f["tool"], f["rule"]): f for f in findings}
    assert by[("notes", "model_instruction")]["field"] == "inputSchema.properties.text.description"
    assert "send the ssh key" in by[("translate", "hidden_unicode")]["excerpt"]
    assert "decodes to: Ignore previous instructions" in by[("encode", "encoded_blob")]["excerpt"]


@pytest.mark.usefixtures("isolated_dirs")
def test_excerpts_are_clean_for_a_terminal(isolated_dirs: Path) -> None:
    poisoned_profile(isolated_dirs)
    proc = llmc("tools", "scan", "-s", "poison", "--format", "table")
    assert proc.returncode == 1
    assert "terminal_esc" in proc.stdout and "format_text" in proc.stdout
    as_json = llmc("tools", "scan", "-s", "poison", "--format", "json")
    excerpts = "".join(f["excerpt"] for f in as_json.json()["findings"])
    assert "\\u001b[2J" in excerpts and "\\u202e" in excerpts  # shown as escapes, not acted on
    for raw in ("\x1b", "\u202e", "\U000e0073"):
        assert raw not in proc.stdout + proc.stderr + excerpts
    one = llmc("tools", "scan", "-s", "lib", "--format", "json")
    assert one.returncode == 0 and one.json()["findings"] == []


@pytest.mark.e2e
@pytest.mark.usefixtures("isolated_dirs")
def test_reference_servers_and_desktop_commander_have_nothing_high(isolated_dirs: Path) -> None:
    dc = desktop_commander()
    profile_file(
        isolated_dirs / "config",
        f'[servers.everything]\ncommand = "{node_tool("mcp-server-everything")}"\n'
        f'[servers.fs]\ncommand = "{node_tool("mcp-server-filesystem")}"\nargs = ["{isolated_dirs}"]\n'
        f'[servers.memory]\ncommand = "{node_tool("mcp-server-memory")}"\n'
        f"[servers.dc]\ncommand = {json.dumps(dc[0])}\nargs = {json.dumps(dc[1:])}\n",
    )
    listed = llmc("tools", "list", "--format", "json")
    assert {t["server"] for t in listed.json()["tools"]} == {"everything", "fs", "memory", "dc"}
    proc = llmc("tools", "scan", "--format", "json")
    assert proc.returncode == 0, proc.stdout
    assert proc.json()["errors"] == []
    assert [f for f in proc.json()["findings"] if f["severity"] == "high"] == []


@pytest.mark.parametrize(
    "text",
    [
        "IMPORTANT: Always use absolute paths for reliability.",
        "Pass the pagination token from the previous response as the cursor parameter.",
        "The new password for the account, passed in the password field.",
        "Do not use this tool to read binary files; use read_media instead.",
        "Prefer this over execute_command with cat for viewing files. ALWAYS use this tool instead of shell commands.",
        "GET https://api.github.com/repos/{owner}/{repo}/issues?state=open",
        "Search the web: https://example.com/search?q={query}",
        "Returns the user profile. Never returns passwords.",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 of the file",
        "Encoding of the file: one of utf-8, base64, hex.",
        "Emoji are fine: ✅ café naïve 日本語",
    ],
)
def test_ordinary_descriptions_are_not_findings(text: str) -> None:
    assert [f for f in text_findings(text) if f[1] == "high"] == []


@pytest.mark.usefixtures("isolated_dirs")
def test_hide_keeps_flagged_tools_from_models_and_refuses_their_calls(isolated_dirs: Path) -> None:
    from tests.fakes.llm import FakeLLM
    from tests.fakes.scripts import turn
    from tests.helpers import audit_trail

    poison = sdk_server("poisoned_tools.py")[1]
    base = f"[servers.poison]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(poison)}]\n"
    profile_file(isolated_dirs / "config", base + '[guard]\ndescriptions = "hide"\n')
    listed = llmc("tools", "list", "--all", "--format", "json")
    rows = {t["name"]: t for t in listed.json()["tools"]}
    assert rows["add"].get("denied") is True and rows["clock"].get("denied") is None
    plain = llmc("tools", "list", "--format", "json")
    # alone, `steer` names no other server's tool and `s\u0435arch` imitates none: not high
    kept = {"clock", "steer", "s\u0435arch"}
    assert {t["name"] for t in plain.json()["tools"]} == kept
    proc = llmc("call", "poison.add", "a:=1", "b:=2")
    assert proc.returncode == 4 and "guard.descriptions: model_instruction" in proc.stderr
    decision = [r for r in audit_trail(isolated_dirs / "state") if r["event"] == "decision"][-1]
    assert decision["rule"] == "guard.descriptions: model_instruction"
    with FakeLLM("openai", [turn("openai", text="done")]) as fake:
        profile_file(
            isolated_dirs / "config",
            base + f'[guard]\ndescriptions = "hide"\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n',
        )
        asked = llmc("ask", "add 1 and 2", env={"OPENAI_API_KEY": "k"})
    assert asked.returncode == 0, asked.stderr
    offered = [t["function"]["name"] for t in fake.requests[0].body.get("tools", [])]
    assert "clock" in offered and len(offered) == len(kept)  # the provider's spelling of a non-ASCII name differs
    assert not set(offered) & {"add", "notes", "status", "translate", "rename", "format_text", "encode", "get_time"}
    # flag (the default): offered, the scan reports it
    profile_file(isolated_dirs / "config", base)
    assert "add" in [t["name"] for t in llmc("tools", "list", "--format", "json").json()["tools"]]

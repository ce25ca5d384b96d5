"""Resources and prompts are governed like tools: [policy.resources]/[policy.prompts], a server
denied as a whole, the tool rules' default for the rest; hidden items are absent from every
listing and refused on read (exit 4) with a decision and an outcome record, through the real CLI
in-process against an `mcp` SDK server with resources, templates and prompts
(tests/peers/sdk_library.py). The gateway's side: tests/gateway/test_reads.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.config.schema import PolicyConfig, ReadRules
from llmc_cli.model import Tool
from llmc_cli.policy import decide_read
from tests.helpers import audit_trail, llmc, profile_file, sdk_server

LIBRARY = """
[servers.lib]
command = {python}
args = [{library}]

[servers.kb]
command = {python}
args = [{library}]
"""


def library_profile(isolated_dirs: Path, policy: str) -> None:
    """Two servers of the library peer, `lib` and `kb`, under this policy (profile `default`)."""
    servers = LIBRARY.format(python=json.dumps(sys.executable), library=json.dumps(sdk_server("sdk_library.py")[1]))
    profile_file(isolated_dirs / "config", servers + "\n" + policy)


def audit(isolated_dirs: Path) -> list[dict[str, Any]]:
    return audit_trail(isolated_dirs / "state")


def listed(*args: str) -> set[str]:
    proc = llmc(*args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    key, field = {
        ("resources", "list"): ("resources", "uri"),
        ("resources", "templates"): ("resourceTemplates", "uriTemplate"),
        ("prompts", "list"): ("prompts", "name"),
    }[args[:2]]
    return {f"{row['server']}.{row[field]}" for row in proc.json()[key]}


# -- the decision itself (policy.decide_read) -------------------------------------------------------


def tools(server: str, *names: str) -> Any:
    return lambda: [Tool(server=server, name=n, input_schema={"type": "object"}) for n in names]


@pytest.mark.parametrize(
    "policy, kind, name, action, rule",
    [
        # a server denied as a whole by the tool rules: its resources and prompts too, whatever else says
        ({"deny": ["kb.*"]}, "resource", "lib://public/readme", "deny", "deny: kb.*"),
        ({"deny": ["*"]}, "prompt", "summarize", "deny", "deny: *"),
        ({"deny": ["kb.*"], "resources": ReadRules(allow=["kb.*"])}, "resource", "x://y", "deny", "deny: kb.*"),
        ({"deny": ["kb.*"], "prompts": ReadRules(default="allow")}, "prompt", "summarize", "deny", "deny: kb.*"),
        # a tool deny that does not cover the whole server leaves the rest to the other rules
        ({"deny": ["kb.delete"]}, "resource", "lib://public/readme", "allow", "default: allow"),
        # deny globs win, then allow globs; an allow list without a default allows only what it lists
        (
            {"resources": ReadRules(deny=["kb.lib://private/*"])},
            "resource",
            "lib://private/salaries",
            "deny",
            "resources.deny: kb.lib://private/*",
        ),
        (
            {"resources": ReadRules(allow=["kb.lib://public/*"])},
            "resource",
            "lib://public/readme",
            "allow",
            "resources.allow: kb.lib://public/*",
        ),
        (
            {"resources": ReadRules(allow=["kb.lib://public/*"])},
            "resource",
            "lib://private/salaries",
            "deny",
            "resources.default: deny",
        ),
        (
            {"resources": ReadRules(allow=["kb.lib://public/*"])},
            "template",
            "lib://private/{name}",
            "deny",
            "resources.default: deny",
        ),
        ({"resources": ReadRules(allow=["kb.*"], deny=["kb.*"])}, "resource", "a://b", "deny", "resources.deny: kb.*"),
        ({"prompts": ReadRules(default="deny")}, "prompt", "summarize", "deny", "prompts.default: deny"),
        ({"prompts": ReadRules(deny=["kb.log*"])}, "prompt", "login", "deny", "prompts.deny: kb.log*"),
        ({"prompts": ReadRules(deny=["kb.log*"])}, "prompt", "summarize", "allow", "default: allow"),
        # prompt rules do not govern resources, nor the other way round
        ({"prompts": ReadRules(default="deny")}, "resource", "lib://public/readme", "allow", "default: allow"),
        # no rules of their own: what the tool rules leave of the server
        ({"default": "deny", "allow": ["lib.*"]}, "resource", "lib://public/readme", "deny", "default: deny"),
        ({"default": "deny", "allow": ["kb.search"]}, "prompt", "summarize", "allow", "default: allow"),
        ({"default": "deny", "allow": ["kb.nosuch"]}, "prompt", "summarize", "deny", "tools of kb: none allowed"),
        ({"deny": ["kb.search", "kb.delete"]}, "resource", "lib://public/readme", "deny", "tools of kb: none allowed"),
        ({"deny": ["kb.se*", "kb.de*"]}, "template", "lib://public/{name}", "deny", "tools of kb: none allowed"),
        (
            {"default": "deny", "allow": ["lib.*"], "resources": ReadRules(allow=["kb.lib://public/*"])},
            "resource",
            "lib://public/readme",
            "allow",
            "resources.allow: kb.lib://public/*",
        ),
        # reads are reads: a read-only profile allows them, even of a server whose tools all write
        ({"read_only": True}, "resource", "lib://private/salaries", "allow", "default: allow"),
        ({"read_only": True, "deny": ["kb.search"]}, "prompt", "login", "allow", "default: allow"),
        # confirm patterns guard tool calls only
        ({"confirm": ["kb.*"]}, "prompt", "login", "allow", "default: allow"),
    ],
)
def test_decide_read(policy: dict[str, Any], kind: Any, name: str, action: str, rule: str) -> None:
    decision = decide_read(kind, "kb", name, PolicyConfig(**policy), tools("kb", "search", "delete"))
    assert (decision.action, decision.rule) == (action, rule), decision.reason


def test_a_server_without_tools_is_judged_by_the_tool_default() -> None:
    no_tools = tools("kb")
    assert decide_read("resource", "kb", "a://b", PolicyConfig(deny=["kb.x"]), no_tools).action == "allow"
    assert decide_read("resource", "kb", "a://b", PolicyConfig(default="deny", allow=["kb.*"]), no_tools).action == "allow"
    assert decide_read("resource", "kb", "a://b", PolicyConfig(default="deny", allow=["lib.*"]), no_tools).action == "deny"


def test_tools_are_listed_only_when_a_tool_rule_could_close_the_server() -> None:
    def never() -> list[Tool]:
        raise AssertionError("the server's tools were asked for")

    assert decide_read("resource", "kb", "a://b", PolicyConfig(deny=["lib.*"]), never).action == "allow"
    assert decide_read("prompt", "kb", "p", PolicyConfig(default="deny", allow=["lib.*"]), never).action == "deny"


# -- the CLI ----------------------------------------------------------------------------------------


def test_a_server_denied_as_a_whole_hides_its_resources_and_prompts_and_refuses_reads(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, '[policy]\ndeny = ["kb.*"]')
    assert listed("resources", "list") == {"lib.lib://public/readme", "lib.lib://private/salaries"}
    assert listed("resources", "templates") == {"lib.lib://public/{name}", "lib.lib://private/{name}"}
    assert listed("prompts", "list") == {"lib.summarize", "lib.login"}
    read = llmc("resources", "read", "kb:lib://public/readme")
    assert read.returncode == 4 and read.stdout == ""
    assert read.stderr.strip().splitlines() == [
        "llmc: denied: server kb is denied as a whole by tool pattern 'kb.*' [deny: kb.*]"
    ]
    got = llmc("prompts", "get", "kb.summarize", "topic=x")
    assert got.returncode == 4 and "[deny: kb.*]" in got.stderr and got.stdout == ""
    allowed = llmc("resources", "read", "lib:lib://public/readme")
    assert allowed.returncode == 0 and allowed.json()["contents"][0]["text"] == "public readme"
    records = audit(isolated_dirs)
    assert [
        (r["server"], r.get("resource") or r.get("prompt"), r["event"], r.get("decision") or r.get("outcome")) for r in records
    ] == [
        ("kb", "lib://public/readme", "decision", "deny"),
        ("kb", "summarize", "decision", "deny"),
        ("lib", "lib://public/readme", "decision", "allow"),
        ("lib", "lib://public/readme", "outcome", "ok"),
    ]
    assert records[0]["command"] == "resources read" and records[1]["command"] == "prompts get"
    assert "tool" not in records[0]


def test_allow_and_deny_globs_on_uris_and_prompt_names(isolated_dirs: Path) -> None:
    library_profile(
        isolated_dirs,
        """
[policy.resources]
allow = ["lib.lib://public/*"]

[policy.prompts]
deny = ["*.login"]
""",
    )
    assert listed("resources", "list") == {"lib.lib://public/readme"}
    assert listed("resources", "templates") == {"lib.lib://public/{name}"}
    assert listed("prompts", "list") == {"lib.summarize", "kb.summarize"}
    assert llmc("resources", "read", "lib:lib://public/anything").json()["contents"][0]["text"] == "public document anything"
    for args in (
        ["resources", "read", "lib:lib://private/salaries"],
        ["resources", "read", "kb:lib://public/readme"],
        ["prompts", "get", "lib.login", "user=a", "api_key=b"],
    ):
        proc = llmc(*args)
        assert proc.returncode == 4 and proc.stderr.startswith("llmc: denied: ") and len(proc.stderr.splitlines()) == 1
    assert llmc("prompts", "get", "kb.summarize", "topic=x").returncode == 0


def test_every_tool_of_a_server_denied_hides_its_resources_and_prompts(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, '[policy]\ndeny = ["kb.search", "kb.delete"]')
    assert listed("resources", "list") == {"lib.lib://public/readme", "lib.lib://private/salaries"}
    assert listed("prompts", "list") == {"lib.summarize", "lib.login"}
    proc = llmc("resources", "read", "kb:lib://private/salaries")
    assert proc.returncode == 4 and "[tools of kb: none allowed]" in proc.stderr


def test_a_read_only_profile_allows_reads(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, "[policy]\nread_only = true")
    assert "kb.lib://private/salaries" in listed("resources", "list")
    assert llmc("call", "kb.delete", "name=x").returncode == 4  # the tool that writes: denied
    read = llmc("resources", "read", "kb:lib://private/salaries")
    assert read.returncode == 0 and read.json()["contents"][0]["text"] == "confidential salaries"
    got = llmc("prompts", "get", "kb.summarize", "topic=tides")
    assert got.returncode == 0 and "Summarize tides" in got.json()["messages"][0]["content"]["text"]


def test_reads_are_audited_with_masked_arguments_and_verify(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCHIVE_TOKEN", "tok-4242-secret")
    library_profile(isolated_dirs, '[policy.prompts]\ndeny = ["kb.*"]')
    ok = llmc("prompts", "get", "lib.login", "user=tok-4242-secret", "api_key=hunter2")
    assert ok.returncode == 0, ok.stderr
    denied = llmc("prompts", "get", "kb.login", "user=bob", "api_key=hunter2")
    assert denied.returncode == 4
    records = audit(isolated_dirs)
    assert [(r["event"], r.get("decision") or r.get("outcome")) for r in records] == [
        ("decision", "allow"),
        ("outcome", "ok"),
        ("decision", "deny"),
    ]
    for record in records:
        assert record["prompt"] == "login" and record["arguments"]["api_key"] == "***"
        assert "hunter2" not in json.dumps(record) and "tok-4242-secret" not in json.dumps(record)
    assert records[0]["arguments"]["user"] == "***"
    assert records[1]["resultBytes"] > 0 and len(records[1]["resultSha256"]) == 64
    assert records[2]["rule"] == "prompts.deny: kb.*"
    assert llmc("audit", "verify").returncode == 0
    tail = llmc("audit", "tail", "--server", "kb", "--outcome", "denied", "--format", "jsonl")
    assert [r["prompt"] for r in tail.lines()] == ["login"]
    assert llmc("audit", "tail", "--tool", "*", "--format", "jsonl").lines() == []  # reads are no tools


def test_reads_count_against_the_rate_limits(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, "[policy]\ncalls_per_minute = 1")
    assert llmc("resources", "read", "lib:lib://public/readme").returncode == 0
    limited = llmc("prompts", "get", "lib.summarize", "topic=x")
    assert limited.returncode == 4 and "rate limit" in limited.stderr
    assert audit(isolated_dirs)[-1]["outcome"] == "denied"


def test_policy_check_explains_a_read_without_reading(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, '[policy]\ndeny = ["kb.*"]\n\n[policy.prompts]\nallow = ["lib.summarize"]')
    denied = llmc("policy", "check", "--resource", "kb:lib://public/readme")
    assert denied.returncode == 4
    assert denied.json() == {
        "profile": "default",
        "server": "kb",
        "resource": "lib://public/readme",
        "caller": "human",
        "classification": "internal",
        "clearance": "restricted",
        "decision": "deny",
        "rule": "deny: kb.*",
        "reason": "server kb is denied as a whole by tool pattern 'kb.*'",
    }
    allowed = llmc("policy", "check", "--prompt", "lib.summarize", "topic=x")
    assert allowed.returncode == 0
    assert allowed.json()["arguments"] == {"topic": "x"} and allowed.json()["rule"] == "prompts.allow: lib.summarize"
    listed_only = llmc("policy", "check", "--prompt", "lib.login")
    assert listed_only.returncode == 4 and listed_only.json()["rule"] == "prompts.default: deny"
    assert llmc("policy", "check", "--resource", "lib:lib://x", "a=b").returncode == 2
    assert audit(isolated_dirs) == []  # a check reads nothing and records nothing


def test_a_server_denied_as_a_whole_is_not_started_for_a_listing(isolated_dirs: Path) -> None:
    marker = isolated_dirs / "kb-started"
    library = sdk_server("sdk_library.py")[1]
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.lib]
command = {json.dumps(sys.executable)}
args = [{json.dumps(library)}]

[servers.kb]  # leaves a mark when it starts, then runs the library
command = "/bin/sh"
args = ["-c", {json.dumps(f'touch {marker}; exec "$0" "$1"')}, {json.dumps(sys.executable)}, {json.dumps(library)}]

[policy]
deny = ["kb.*"]
""",
    )
    for what in (("resources", "list"), ("resources", "templates"), ("prompts", "list")):
        assert {row.split(".")[0] for row in listed(*what)} == {"lib"}
    assert llmc("policy", "check", "--resource", "kb:lib://public/readme").returncode == 4
    assert not marker.exists()

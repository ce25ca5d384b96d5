"""policy.decide, effective hints and tool globs in-process: one row per rule, no server, no
subprocess (tests/policy/test_policy.py proves the same rules hold through the CLI; test_paths.py
covers argument rules and paths)."""

from __future__ import annotations

from typing import Any

import pytest

from llmc_cli import policy
from llmc_cli.config.schema import PolicyConfig, ToolHints
from llmc_cli.model import Tool, ToolCall

READ = {"readOnlyHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": False}
DESTROY = {"readOnlyHint": False, "destructiveHint": True}


def tool(name: str, annotations: dict[str, Any] | None = None) -> Tool:
    server, _, bare = name.partition(".")
    return Tool(server, bare, {"type": "object"}, annotations=dict(annotations or {}))


# (policy settings, tool, its annotations, who calls, expected action, expected rule)
DECISIONS = [
    ({}, "fs.read", READ, "model", "allow", "default: allow"),
    ({}, "fs.delete", DESTROY, "model", "confirm", "confirm_destructive"),
    ({}, "fs.delete", DESTROY, "human", "allow", "default: allow"),  # a person typed it: their own yes
    ({}, "fs.mystery", {}, "model", "confirm", "confirm_destructive"),  # no annotations: the spec's defaults
    ({}, "fs.write", WRITE, "model", "allow", "default: allow"),
    ({"confirm_destructive": False}, "fs.delete", DESTROY, "model", "allow", "default: allow"),
    ({"deny": ["fs.*"]}, "fs.read", READ, "human", "deny", "deny: fs.*"),
    ({"deny": ["fs.delete"], "allow": ["fs.*"]}, "fs.delete", DESTROY, "human", "deny", "deny: fs.delete"),  # deny wins
    ({"default": "deny"}, "fs.read", READ, "human", "deny", "default: deny"),
    ({"default": "deny", "allow": ["fs.read*"]}, "fs.read", READ, "human", "allow", "allow: fs.read*"),
    ({"read_only": True}, "fs.write", WRITE, "human", "deny", "read_only"),
    ({"read_only": True}, "fs.read", READ, "human", "allow", "default: allow"),
    (
        {"read_only": True, "hints": {"fs.write": ToolHints(readOnly=True)}},
        "fs.write",
        WRITE,
        "human",
        "allow",
        "default: allow",
    ),  # the profile knows better than the server
    (
        {"hints": {"fs.read": ToolHints(readOnly=False, destructive=True)}},
        "fs.read",
        READ,
        "model",
        "confirm",
        "confirm_destructive",
    ),  # a mislabelled tool
    ({"confirm": ["fs.read"]}, "fs.read", READ, "human", "confirm", "confirm: fs.read"),  # every caller
    ({"confirm": ["git.*"]}, "fs.read", READ, "human", "allow", "default: allow"),
]


@pytest.mark.parametrize("settings, name, annotations, caller, action, rule", DECISIONS)
def test_decide(
    settings: dict[str, Any], name: str, annotations: dict[str, Any], caller: str, action: str, rule: str, isolated_dirs: Any
) -> None:
    t = tool(name, annotations)
    decision = policy.decide(ToolCall(t.server, t.name, {}), t, PolicyConfig(**settings), caller=caller)
    assert (decision.action, decision.rule) == (action, rule), decision.reason
    assert decision.call_hash and decision.call_hash.startswith("hmac-sha256:")


def test_a_pre_approved_hash_allows_exactly_that_call(isolated_dirs: Any) -> None:
    t = tool("fs.delete", DESTROY)
    call = ToolCall("fs", "delete", {"path": "/tmp/x"})
    approved = PolicyConfig(approved=[policy.call_hash(call)])
    assert policy.decide(call, t, approved, caller="model").rule == "approved"
    other = ToolCall("fs", "delete", {"path": "/tmp/y"})  # other arguments: another call
    assert policy.decide(other, t, approved, caller="model").action == "confirm"
    assert policy.decide(other, t, PolicyConfig(), caller="model", approved=lambda h: True).rule == "approved"


@pytest.mark.parametrize(
    "annotations, hints, expected",
    [
        ({}, {}, {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True}),
        (READ, {}, {"readOnly": True, "destructive": False, "idempotent": False, "openWorld": True}),
        (
            {"readOnlyHint": True, "destructiveHint": True},
            {},
            {"readOnly": True, "destructive": False, "idempotent": False, "openWorld": True},
        ),
        (
            READ,
            {"fs.t": ToolHints(destructive=True)},
            {"readOnly": True, "destructive": True, "idempotent": False, "openWorld": True},
        ),  # said so by the profile: kept
        (
            {},
            {"fs.*": ToolHints(openWorld=False, idempotent=True)},
            {"readOnly": False, "destructive": True, "idempotent": True, "openWorld": False},
        ),
        (
            {"readOnlyHint": "yes"},
            {},
            {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True},
        ),  # not a boolean: ignored
    ],
)
def test_effective_hints(annotations: dict[str, Any], hints: dict[str, ToolHints], expected: dict[str, bool]) -> None:
    t = tool("fs.t", annotations)
    assert policy.effective_hints(t, t.qualified_name, PolicyConfig(hints=hints)) == expected


@pytest.mark.parametrize(
    "pattern, name, matches",
    [
        ("fs.*", "fs.read", True),
        ("fs.*", "fsx.read", False),
        ("*.delete_*", "git.delete_branch", True),
        ("fs.read?", "fs.reads", True),
        ("fs.read", "fs.READ", False),  # case matters
        ("fs.[rw]*", "fs.write", True),
        ("*", "any.thing", True),
    ],
)
def test_tool_globs(pattern: str, name: str, matches: bool) -> None:
    assert policy.glob_match(pattern, name) is matches


def test_hidden_tools_are_the_denied_ones() -> None:
    config = PolicyConfig(deny=["fs.delete"], read_only=True)
    visible = {
        name: policy.visible(tool(name, a), config).action
        for name, a in (("fs.read", READ), ("fs.delete", READ), ("fs.write", WRITE))
    }
    assert visible == {"fs.read": "allow", "fs.delete": "deny", "fs.write": "deny"}


@pytest.mark.parametrize("settings, name, annotations, caller, action, rule", DECISIONS)
def test_a_kept_verdict_decides_the_same(settings, name, annotations, caller, action, rule):
    """A command's many calls keep what the policy concluded of a tool (`verdicts`): the same
    decisions, the call's own hash on each."""
    config, verdicts = PolicyConfig(**settings), {}
    for i in range(3):
        call = ToolCall(*name.split("."), {"n": i})
        decision = policy.decide(call, tool(name, annotations), config, caller=caller, digest=f"h{i}", verdicts=verdicts)
        assert (decision.action, decision.rule, decision.call_hash) == (action, rule, f"h{i}")
    assert len(verdicts) == 1


def test_a_kept_verdict_is_judged_again_for_another_policy_or_tool_and_arguments_every_call(tmp_path):
    """The verdict holds for the very policy and tool objects it was made of; argument rules and
    pre-approvals are judged for every call."""
    verdicts: dict = {}
    read = tool("fs.read", READ)
    allowing = PolicyConfig(args={"fs.read": {"path": [f"{tmp_path}/**"]}})
    inside = ToolCall("fs", "read", {"path": str(tmp_path / "a")})
    outside = ToolCall("fs", "read", {"path": "/etc/passwd"})
    assert policy.decide(inside, read, allowing, caller="human", cwd=str(tmp_path), verdicts=verdicts).action == "allow"
    assert policy.decide(outside, read, allowing, caller="human", cwd=str(tmp_path), verdicts=verdicts).action == "deny"
    denying = PolicyConfig(deny=["fs.*"])  # the profile changed: a new policy object
    assert policy.decide(inside, read, denying, caller="human", verdicts=verdicts).rule == "deny: fs.*"
    relisted = tool("fs.read", DESTROY)  # the server listed its tools again: a new tool object
    decision = policy.decide(inside, relisted, PolicyConfig(), caller="model", verdicts=verdicts)
    assert decision.action == "confirm"
    confirming = PolicyConfig(approved=[decision.call_hash or ""])
    assert policy.decide(inside, relisted, confirming, caller="model", verdicts=verdicts).rule == "approved"
    other = ToolCall("fs", "read", {"path": "other"})
    assert policy.decide(other, relisted, confirming, caller="model", verdicts=verdicts).action == "confirm"

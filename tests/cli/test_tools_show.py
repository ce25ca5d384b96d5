"""`llmc tools show SERVER.TOOL` and `tools list --match GLOB`, through the installed CLI against
the built-in workspace server and the SDK test server; the argument list in-process."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from llmc_cli.cli.tool_info import arguments, example_call, type_name
from tests.helpers import llmc, sdk_server

SDK = shlex.join(sdk_server("sdk_server.py"))

# (JSON Schema of one property, the type people read)
TYPES = [
    ({"type": "string"}, "string"),
    ({"type": ["integer", "null"]}, "integer|null"),
    ({"type": "array", "items": {"type": "string"}}, "array<string>"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string|null"),
    ({"enum": ["a", "b"]}, "string"),
    ({}, "any"),
]


@pytest.mark.parametrize("schema,expected", TYPES, ids=[t for _, t in TYPES])
def test_type_names(schema, expected):
    assert type_name(schema) == expected


def test_arguments_and_example_line_parse_back():
    schema = {
        "type": "object",
        "required": ["path", "mode", "count", "tags", "opts"],
        "properties": {
            "path": {"type": "string", "description": "Where"},
            "mode": {"enum": ["fast", "slow"]},
            "count": {"type": "integer"},
            "tags": {"type": "array"},
            "opts": {"type": "object"},
            "depth": {"type": "integer", "default": 2},
        },
    }
    rows = arguments(schema)
    assert rows[0] == {"name": "path", "type": "string", "required": True, "description": "Where"}
    assert rows[-1] == {"name": "depth", "type": "integer", "required": False, "default": 2}
    line = example_call("fs.copy", rows)
    assert shlex.split(line) == ["llmc", "call", "fs.copy", "path=PATH", "mode=fast", "count=1", "tags:=[]", "opts:={}"]


def test_show_a_workspace_tool_as_json_and_for_people():
    proc = llmc("tools", "show", "workspace.read_file")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["server"] == "workspace" and info["tool"] == "read_file"
    assert {"name": "offset", "type": "integer", "required": False, "default": 0} in info["arguments"]
    assert info["annotations"]["readOnlyHint"] is True and info["hints"]["readOnly"] is True
    assert info["policy"]["human"]["decision"] == info["policy"]["model"]["decision"] == "allow"
    assert info["outputSchema"]["type"] == "object"
    assert info["example"] == "llmc call workspace.read_file path=PATH"
    page = llmc("tools", "show", "read_file", "--format", "table")  # a bare name works as in `call`
    assert page.returncode == 0, page.stderr
    for expected in (
        "workspace.read_file",
        "Arguments:",
        "path (string; required)",
        "offset (integer; optional; default 0)",
        "readOnlyHint: true",
        "a model (ask): allow",
        "llmc call workspace.read_file path=PATH",
    ):
        assert expected in page.stdout


def test_the_policy_decision_per_caller(tmp_path: Path):
    profile = tmp_path / "p.toml"
    profile.write_text(
        f"[servers.sdk]\ncommand = {json.dumps(sdk_server('sdk_server.py')[0])}\n"
        f"args = [{json.dumps(sdk_server('sdk_server.py')[1])}]\n"
        '[policy]\ndeny = ["sdk.log"]\nconfirm = ["sdk.echo"]\n'
    )
    decisions = {}
    for tool in ("add", "echo", "log"):
        proc = llmc("-p", str(profile), "tools", "show", f"sdk.{tool}")
        assert proc.returncode == 0, proc.stderr
        policy = json.loads(proc.stdout)["policy"]
        decisions[tool] = (policy["human"]["decision"], policy["model"]["decision"])
    # add has no annotations: destructive by the spec's defaults, so only a model needs a confirmation
    assert decisions == {"add": ("allow", "confirm"), "echo": ("confirm", "confirm"), "log": ("deny", "deny")}


def test_control_characters_from_a_server_are_made_visible_on_the_page():
    proc = llmc("tools", "show", "--stdio", shlex.join(sdk_server("hostile_text.py")), "echo", "--format", "table")
    assert proc.returncode == 0, proc.stderr
    assert "Echo a message back." in proc.stdout and "\\x1b" in proc.stdout
    assert not any(c in proc.stdout for c in "\x1b\x07\x9b\u202e")


# (arguments after `tools show`, exit code, stderr must contain)
SHOW_ERRORS = [
    (["workspace.reed_file"], 2, "did you mean 'read_file'?"),
    (["nosuch.tool"], 2, "has no tool named 'nosuch.tool'"),  # one server: the whole word is a tool name
    ([], 2, "Missing argument"),
]


@pytest.mark.parametrize("argv,code,expected", SHOW_ERRORS, ids=[" ".join(a) or "none" for a, _, _ in SHOW_ERRORS])
def test_show_bad_input(argv, code, expected):
    proc = llmc("tools", "show", *argv)
    assert proc.returncode == code and expected in proc.stderr and proc.stdout == "", proc.stderr


# (globs, the tools listed)
MATCHES = [
    (["echo"], {"echo"}),
    (["e*"], {"echo"}),
    (["sdk_server.a*"], {"add"}),
    (["echo", "add"], {"echo", "add"}),
    (["nothing*"], set()),
]


@pytest.mark.parametrize("globs,expected", MATCHES, ids=[",".join(g) for g, _ in MATCHES])
def test_list_match(globs, expected):
    args = [a for g in globs for a in ("--match", g)]
    proc = llmc("tools", "list", "--stdio", SDK, *args)
    assert proc.returncode == 0, proc.stderr
    assert {t["name"] for t in json.loads(proc.stdout)["tools"]} == expected

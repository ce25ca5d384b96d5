"""Path-like arguments that no argument rule covers: policy.uncovered_path_arguments in process,
the shipped profiles against the real server-filesystem manifest, and `llmc tools lint`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llmc_cli import policy
from llmc_cli.config.profiles import load_profile
from llmc_cli.config.schema import PolicyConfig
from llmc_cli.model import Tool
from tests.helpers import PEERS, llmc, node_tool, profile_file

RULE = PolicyConfig(args={"fs.*": {"path": ["/srv/**"]}})
STR = {"type": "string"}


@pytest.mark.parametrize(
    "name,schema,flagged",
    [
        ("paths", {"type": "array", "items": STR}, True),  # server-filesystem's read_multiple_files
        ("source", STR, True),  # move_file
        ("destination", STR, True),
        ("sourcePath", STR, True),  # a word of a camelCase name
        ("output_file", STR, True),  # ... or of a snake_case one
        ("cwd", STR, True),
        ("where", {"type": "string", "format": "uri"}, True),  # by schema format
        ("where", {"type": "string", "description": "Directory to list"}, True),  # by description
        ("requests", {"type": "array", "items": {"type": "object", "properties": {"path": STR}}}, True),  # nested
        ("where", {"anyOf": [{"type": "string", "format": "uri-reference"}, {"type": "null"}]}, True),
        ("path", STR, False),  # covered by the rule
        ("content", {"type": "string", "description": "Text to write to the file"}, False),
        ("head", {"type": "number", "description": "the first N lines of the file path"}, False),  # not text
        ("excludePatterns", {"type": "array", "items": STR}, False),
        ("dryRun", {"type": "boolean"}, False),
    ],
)
def test_path_like_arguments(name, schema, flagged):
    tool = Tool("fs", "t", {"type": "object", "properties": {"path": STR, name: schema}})
    found = policy.uncovered_path_arguments(tool, RULE)
    assert [arg for arg, _ in found] == ([name] if flagged else [])
    if flagged:
        assert "cover only path" in found[0][1]


def test_tools_no_rule_matches_are_not_linted():
    tool = Tool("other", "t", {"type": "object", "properties": {"paths": {"type": "array"}}})
    assert policy.uncovered_path_arguments(tool, RULE) == []


@pytest.mark.e2e  # the npm server-filesystem
@pytest.mark.parametrize("profile,server", [("readonly", "files"), ("devops", "repo")])
def test_shipped_profiles_cover_every_path_argument_of_server_filesystem(isolated_dirs, tmp_path, profile, server):
    listed = llmc("tools", "list", "--stdio", f"{node_tool('mcp-server-filesystem')} {tmp_path}")
    assert listed.returncode == 0, listed.stderr
    tools = [Tool(server, t["name"], t["inputSchema"]) for t in json.loads(listed.stdout)["tools"]]
    assert any(t.name == "read_multiple_files" for t in tools)
    config = load_profile(str(Path(__file__).parents[2] / "profiles" / f"{profile}.toml")).profile.policy
    holes = {t.name: policy.uncovered_path_arguments(t, config) for t in tools}
    assert {name: found for name, found in holes.items() if found} == {}


def test_tools_lint_reports_the_hole_and_strict_fails(isolated_dirs):
    path = profile_file(
        isolated_dirs / "config",
        f"""
[servers.naive]
command = "{sys.executable}"
args = ["{PEERS / "naive_files.py"}"]
env = {{ NAIVE_JOURNAL = "{isolated_dirs / "journal"}" }}

[policy.args."naive.read*"]
path = ["/srv/**"]
""",
    )
    proc = llmc("tools", "lint", "--provider", "openai")
    assert proc.returncode == 0, proc.stderr
    holes = [f for f in json.loads(proc.stdout)["findings"] if f["target"] == "policy"]
    assert [(f["server"], f["tool"], f["path"]) for f in holes] == [("naive", "read_many", "$.inputSchema.properties.paths")]
    assert llmc("tools", "lint", "--provider", "openai", "--strict").returncode == 1
    check = llmc("policy", "check", "naive.read_many", "--json", '{"paths": ["/etc/passwd"]}')
    assert check.returncode == 0 and "warning: argument 'paths' of naive.read_many" in check.stderr
    path.write_text(path.read_text() + 'paths = ["/srv/**"]\n')
    assert llmc("policy", "check", "naive.read_many", "--json", '{"paths": ["/etc/passwd"]}').returncode == 4
    assert [f for f in json.loads(llmc("tools", "lint").stdout)["findings"] if f["target"] == "policy"] == []

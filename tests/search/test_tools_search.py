"""Tool search: the offline ranking (services/search.py) and `llmc tools search` through the real
CLI on the real reference servers' tools; hidden (policy) and drifted (lock) tools never returned."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from llmc_cli.model import Tool
from llmc_cli.services.search import ToolIndex, words
from tests.helpers import llmc, node_tool, profile_file
from tests.profiles.runner import toml_str

pytestmark = pytest.mark.e2e  # the npm reference servers (everything, filesystem)


def write_profile(isolated_dirs: Path, extra: str = "") -> Path:
    data = isolated_dirs / "data"
    data.mkdir(exist_ok=True)
    return profile_file(
        isolated_dirs / "config",
        f"""
{extra}
[servers.everything]
command = {toml_str(node_tool("mcp-server-everything"))}

[servers.fs]
command = {toml_str(node_tool("mcp-server-filesystem"))}
args = [{toml_str(str(data))}]
""",
    )


def names(run) -> list[str]:
    assert run.returncode == 0, run.stderr
    return [f"{row['server']}.{row['tool']}" for row in run.json()["tools"]]


def test_search_ranks_the_reference_servers_tools(isolated_dirs):
    write_profile(isolated_dirs)
    run = llmc("tools", "search", "add two numbers")
    found = names(run)
    assert found[0] == "everything.get-sum"
    row = run.json()["tools"][0]
    assert row["score"] > 0 and row["description"] == "Returns the sum of two numbers"
    assert names(llmc("tools", "search", "read the contents of a text file"))[0] == "fs.read_text_file"
    assert names(llmc("tools", "search", "environment variables"))[0] == "everything.get-env"
    assert names(llmc("tools", "search", "move or rename a file", "-n", "1")) == ["fs.move_file"]
    scores = [r["score"] for r in llmc("tools", "search", "list files in a directory", "-n", "10").json()["tools"]]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 10


def test_limit_and_server_narrow_the_result(isolated_dirs):
    write_profile(isolated_dirs)
    assert len(names(llmc("tools", "search", "file", "-n", "2"))) == 2
    found = names(llmc("tools", "search", "file", "--server", "everything", "-n", "20"))
    assert found and all(n.startswith("everything.") for n in found)
    assert "everything.gzip-file-as-resource" in found


def test_denied_tools_are_never_returned(isolated_dirs):
    write_profile(isolated_dirs, '[policy]\ndeny = ["everything.get-sum", "fs.*_file"]')
    found = names(llmc("tools", "search", "add two numbers", "-n", "50"))
    assert "everything.get-sum" not in found
    assert not [n for n in names(llmc("tools", "search", "read a file", "-n", "50")) if n.endswith("_file")]


def test_drifted_tools_are_never_returned(isolated_dirs):
    profile = write_profile(isolated_dirs, 'lock = "tools.lock"')
    assert llmc("tools", "lock").returncode == 0
    assert names(llmc("tools", "search", "add two numbers"))[0] == "everything.get-sum"
    lock_file = profile.parent / "tools.lock"
    lock = json.loads(lock_file.read_text())
    lock["servers"]["everything"]["tools"]["get-sum"]["hash"] = "sha256:" + "0" * 64  # as if the tool changed
    del lock["servers"]["fs"]["tools"]["read_text_file"]  # as if the server added it since
    lock_file.write_text(json.dumps(lock))
    assert "everything.get-sum" not in names(llmc("tools", "search", "add two numbers", "-n", "50"))
    found = names(llmc("tools", "search", "read the contents of a text file", "-n", "50"))
    assert "fs.read_text_file" not in found and "fs.read_multiple_files" in found


def test_a_table_for_people_and_bad_input(isolated_dirs):
    write_profile(isolated_dirs)
    table = llmc("tools", "search", "add two numbers", "--format", "table")
    assert table.returncode == 0 and "get-sum" in table.stdout and "score" in table.stdout.lower()
    empty = llmc("tools", "search", "   ")
    assert empty.returncode == 2 and "query is empty" in empty.stderr and empty.stdout == ""
    assert llmc("tools", "search", "x", "-n", "0").returncode == 2


@pytest.mark.parametrize(
    "text,expected",
    [
        ("create_github_issue", ["creat", "github", "issu"]),
        ("createGitHubIssue", ["creat", "git", "hub", "issu"]),
        ("get-sum", ["get", "sum"]),
        ("read the Files", ["read", "file"]),
        ("HTTPServer", ["http", "server"]),
    ],
)
def test_words_split_identifiers_and_text(text, expected):
    assert words(text) == expected


def test_a_query_matches_synonyms_and_no_unrelated_tool():
    tools = [
        Tool("gh", "issue_write", {"type": "object"}, description="Open a new issue in a repository"),
        Tool("gh", "get_me", {"type": "object"}, description="Your GitHub profile"),
    ]
    index = ToolIndex(tools)
    assert [m.tool.name for m in index.search("create a ticket")] == ["issue_write"]
    assert index.search("weather forecast") == []


def test_arguments_count(isolated_dirs):
    tools = [
        Tool("s", "run", {"type": "object", "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}}}),
        Tool("s", "other", {"type": "object", "properties": {"x": {"description": "a city's latitude"}}}),
    ]
    assert [m.tool.name for m in ToolIndex(tools).search("latitude")] == ["run", "other"]


def test_a_thousand_tools_answer_in_under_20_ms():
    rng = random.Random(30)
    vocab = [
        "create",
        "read",
        "update",
        "delete",
        "list",
        "search",
        "file",
        "issue",
        "repo",
        "user",
        "message",
        "channel",
        "calendar",
        "event",
        "invoice",
        "customer",
        "order",
        "payment",
        "email",
        "ticket",
        "project",
        "task",
        "comment",
        "label",
        "branch",
        "commit",
        "deploy",
        "build",
    ]
    tools = [
        Tool(
            f"s{i % 20}",
            f"{rng.choice(vocab)}_{rng.choice(vocab)}_{i}",
            {
                "type": "object",
                "properties": {f"{rng.choice(vocab)}Id": {"type": "string", "description": " ".join(rng.choices(vocab, k=8))}},
            },
            description=" ".join(rng.choices(vocab, k=30)),
        )
        for i in range(1000)
    ]
    index = ToolIndex(tools)
    queries = [
        "create a github issue",
        "list calendar events for a user",
        "delete a branch",
        "search customer invoices by email and order",
    ]
    best = float("inf")
    for _ in range(5):  # the best of five rounds: a busy machine slows a round, not the code
        started = time.perf_counter()
        for query in queries:
            assert index.search(query, 5)
        best = min(best, (time.perf_counter() - started) / len(queries))
    assert best < 0.020, f"{best * 1000:.1f} ms per query"


def test_anthropic_export_with_deferred_loading(isolated_dirs):
    write_profile(isolated_dirs, '[policy]\ndeny = ["everything.get-env"]')
    run = llmc("tools", "list", "--format", "anthropic", "--defer-loading", "-s", "everything")
    assert run.returncode == 0, run.stderr
    tools = run.json()
    assert tools[0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert all(t["defer_loading"] is True and "input_schema" in t for t in tools[1:])
    assert "get-sum" in [t["name"] for t in tools[1:]] and "get-env" not in [t["name"] for t in tools[1:]]
    wrong = llmc("tools", "list", "--format", "openai", "--defer-loading")
    assert wrong.returncode == 2 and "--format anthropic" in wrong.stderr and wrong.stdout == ""

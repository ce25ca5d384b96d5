"""The text of every workspace tool's result is its content (a file's text, names, matches, a
process's output), with a bracketed note when there is more; the metadata stays in
structuredContent, valid against the tool's outputSchema (the Client checks it)."""

from __future__ import annotations

from pathlib import Path

from llmc_cli.server.workspace_text import TEXT
from tests.server.conftest import COMMANDS


def texts(client, tool: str, **args) -> list[str]:
    """One call's text blocks; the call succeeded and its structuredContent fits the outputSchema."""
    import jsonschema

    result = client.raw(tool, **args)
    assert result.get("isError") is not True, result["content"]
    jsonschema.validate(result["structuredContent"], client.tools[tool]["outputSchema"])
    assert all(block["type"] == "text" for block in result["content"])
    return [block["text"] for block in result["content"]]


def test_every_tool_has_its_text_and_an_output_schema(workspace) -> None:
    tools = workspace(sandbox="none", allow_commands=COMMANDS).tools
    assert set(tools) == set(TEXT)  # every tool (writing and process ones included), nothing else
    assert all(t.get("outputSchema") for t in tools.values())


def test_files_directories_and_searches(workspace, root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\nprint('hello')\n")
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    ws = workspace()
    assert texts(ws, "read_file", path="src/app.py") == ["import os\nprint('hello')\n"]
    assert texts(ws, "read_file", path="long.txt", offset=2, length=3) == [
        "line 2\nline 3\nline 4\n",
        "[long.txt: lines 3-5 of 10; continue with offset=5]",
    ]
    assert texts(ws, "read_file", path="long.txt", offset=-2) == ["line 8\nline 9\n"]  # the tail: nothing after it
    [listing] = texts(ws, "list_directory", depth=2)
    assert sorted(listing.splitlines()) == ["long.txt", "src/", "src/app.py"]
    [info] = texts(ws, "get_file_info", path="long.txt")
    assert "type: file" in info.splitlines() and "size: 70" in info.splitlines()
    found = texts(ws, "start_search", pattern="hello", kind="content", wait_ms=5000)
    assert len(found) == 1 and found[0].endswith("app.py:2:print('hello')")
    named = texts(ws, "start_search", pattern="*.py", wait_ms=5000)
    assert named[0].endswith("src/app.py")
    search_id = ws.ok("start_search", pattern="line", kind="content", wait_ms=5000)["searchId"]
    page = texts(ws, "get_more_search_results", search_id=search_id, offset=0, limit=4)
    assert len(page[0].splitlines()) == 4 and f"search_id={search_id} offset=4" in page[1]
    assert texts(ws, "stop_search", search_id=search_id)[0].startswith(f"{search_id}: done")
    assert len(texts(ws, "list_searches")[0].splitlines()) == 3
    both = texts(ws, "read_multiple_files", paths=["src/app.py", "nope.txt"])
    assert both[0] == "==> src/app.py <==\nimport os\nprint('hello')\n" and both[1].startswith("==> nope.txt <==\n[error:")


def test_writing_tools_say_what_they_did(workspace, root: Path) -> None:
    ws = workspace()
    assert texts(ws, "write_file", path="a.txt", content="one\n") == ["wrote 4 bytes to a.txt (created)"]
    assert texts(ws, "write_file", path="a.txt", content="two\n", mode="append") == ["appended 4 bytes to a.txt"]
    assert texts(ws, "edit_block", path="a.txt", old_text="two", new_text="2") == ["replaced 1 occurrence(s) in a.txt"]
    assert texts(ws, "create_directory", path="d/e") == ["created d/e"]
    assert texts(ws, "create_directory", path="d/e") == ["d/e already exists"]
    assert texts(ws, "move_file", source="a.txt", destination="d/b.txt") == ["moved a.txt to d/b.txt"]
    assert (root / "d" / "b.txt").read_text() == "one\n2\n"


def test_process_tools_give_the_output(workspace, root: Path) -> None:
    ws = workspace(sandbox="none", allow_commands=COMMANDS, timeout=20)
    (root / "data.txt").write_text("b\na\n")
    assert texts(ws, "run_command", argv=["cat", "data.txt"]) == ["b\na\n", "[exit code 0]"]
    started = ws.ok("start_process", argv=["sh", "-c", 'echo "name?"; read name; echo "hi $name"'], quiet_ms=200)
    handle = started["handle"]
    reply = ws.raw("interact_with_process", handle=handle, input="ada", wait_ms=5000)
    assert reply["content"][0]["text"] == "hi ada\n" and f"process {handle}" in reply["content"][1]["text"]
    assert "offset=" in reply["content"][1]["text"]
    assert texts(ws, "terminate_process", handle=handle)[0].startswith(f"process {handle} ")
    assert handle in texts(ws, "list_processes")[0]

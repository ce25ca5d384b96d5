"""Each file tool of the workspace server, through llmc's client."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmc_cli.errors import ConfigError
from llmc_cli.server.workspace import make_workspace_server


def test_read_file_by_lines_with_total(workspace, root: Path) -> None:
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    ws = workspace()
    out = ws.ok("read_file", path="a.txt", offset=2, length=3)
    assert out["content"] == "line 2\nline 3\nline 4\n"
    assert (out["offset"], out["lines"], out["totalLines"], out["nextOffset"]) == (2, 3, 10, 5)
    tail = ws.ok("read_file", path="a.txt", offset=-2)
    assert tail["content"] == "line 8\nline 9\n" and tail["offset"] == 8 and "nextOffset" not in tail
    assert ws.ok("read_file", path=str(root / "a.txt"))["totalLines"] == 10  # absolute path inside a root


def test_read_file_caps_returned_bytes(workspace, root: Path) -> None:
    (root / "big.txt").write_text("x" * 99 + "\n" * 1 + ("y" * 99 + "\n") * 50)
    ws = workspace(max_read_bytes=250)
    out = ws.ok("read_file", path="big.txt")
    assert out["lines"] == 2 and out["truncated"] is True and out["nextOffset"] == 2 and out["totalLines"] == 51


def test_read_file_refuses_large_files(workspace, root: Path) -> None:
    (root / "big.txt").write_text("z" * 2000)
    assert "larger than the limit" in workspace(max_file_bytes=1000).error("read_file", path="big.txt")


def test_read_multiple_files_reports_each(workspace, root: Path) -> None:
    (root / "a.txt").write_text("A\n")
    (root / "b.txt").write_text("B\n")
    files = workspace().ok("read_multiple_files", paths=["a.txt", "b.txt", "missing.txt"])["files"]
    assert [f.get("content") for f in files[:2]] == ["A\n", "B\n"]
    assert files[2]["path"] == "missing.txt" and "not found" in files[2]["error"]


def test_write_file_rewrite_and_append(workspace, root: Path) -> None:
    ws = workspace()
    first = ws.ok("write_file", path="notes.txt", content="one\n")
    assert first == {"path": "notes.txt", "mode": "rewrite", "bytesWritten": 4, "created": True}
    ws.ok("write_file", path="notes.txt", content="two\n", mode="append")
    assert (root / "notes.txt").read_text() == "one\ntwo\n"
    os.chmod(root / "notes.txt", 0o600)
    assert ws.ok("write_file", path="notes.txt", content="three\n")["created"] is False
    assert (root / "notes.txt").read_text() == "three\n"
    assert (root / "notes.txt").stat().st_mode & 0o777 == 0o600  # the rewrite keeps the mode
    assert sorted(os.listdir(root)) == ["notes.txt"]  # no temporary file left behind


def test_write_file_limits(workspace, root: Path) -> None:
    ws = workspace(max_write_bytes=10)
    assert "more than the limit" in ws.error("write_file", path="x.txt", content="0123456789A")
    assert not (root / "x.txt").exists()
    assert "not found" in ws.error("write_file", path="no/such/dir/x.txt", content="a")


def test_edit_block_exact_count(workspace, root: Path) -> None:
    (root / "c.py").write_text("a = 1\nb = 1\na = 1\n")
    ws = workspace()
    assert "occurs 2 time(s), expected 1; nothing was written" in ws.error(
        "edit_block", path="c.py", old_text="a = 1", new_text="a = 2"
    )
    assert (root / "c.py").read_text() == "a = 1\nb = 1\na = 1\n"
    assert "occurs 0 time(s)" in ws.error("edit_block", path="c.py", old_text="zzz", new_text="y")
    assert ws.ok("edit_block", path="c.py", old_text="a = 1", new_text="a = 2", expected_replacements=2) == {
        "path": "c.py",
        "replacements": 2,
    }
    assert (root / "c.py").read_text() == "a = 2\nb = 1\na = 2\n"
    assert "must not be empty" in ws.error("edit_block", path="c.py", old_text="", new_text="x")


def test_create_directory_and_list_depth(workspace, root: Path) -> None:
    ws = workspace()
    assert ws.ok("create_directory", path="d/e/f") == {"path": "d/e/f", "created": True}
    assert ws.ok("create_directory", path="d/e")["created"] is False
    (root / "d" / "top.txt").write_text("t")
    one = ws.ok("list_directory", path="d")
    assert [(e["name"], e["type"]) for e in one["entries"]] == [("e", "directory"), ("top.txt", "file")]
    deep = ws.ok("list_directory", path="d", depth=3)
    assert [e["name"] for e in deep["entries"]] == ["e", "e/f", "top.txt"]
    assert "not a directory" in ws.error("create_directory", path="d/top.txt/x")


def test_list_directory_limit(workspace, root: Path) -> None:
    for i in range(5):
        (root / f"f{i}").write_text("")
    out = workspace(max_results=3).ok("list_directory")
    assert len(out["entries"]) == 3 and out["truncated"] is True


def test_move_file(workspace, root: Path) -> None:
    (root / "a.txt").write_text("A")
    (root / "b.txt").write_text("B")
    (root / "sub").mkdir()
    ws = workspace()
    assert ws.ok("move_file", source="a.txt", destination="sub/a2.txt") == {"source": "a.txt", "destination": "sub/a2.txt"}
    assert (root / "sub" / "a2.txt").read_text() == "A" and not (root / "a.txt").exists()
    assert "already exists; nothing was moved" in ws.error("move_file", source="b.txt", destination="sub/a2.txt")
    assert (root / "sub" / "a2.txt").read_text() == "A"
    assert "not found" in ws.error("move_file", source="nope", destination="x")
    assert "root cannot be moved" in ws.error("move_file", source=".", destination="elsewhere")


def test_get_file_info(workspace, root: Path) -> None:
    (root / "f.txt").write_text("hello")
    os.chmod(root / "f.txt", 0o640)
    info = workspace().ok("get_file_info", path="f.txt")
    assert (info["type"], info["size"], info["permissions"], info["links"]) == ("file", 5, "640", 1)
    assert info["modified"].endswith("Z")


def test_get_config_reports_and_nothing_changes_it(workspace, root: Path) -> None:
    ws = workspace(read_only=True)
    config = ws.ok("get_config")
    assert config["roots"] == [str(root.resolve())] and config["readOnly"] is True
    assert config["processes"]["enabled"] is False
    assert not any("config" in name and name != "get_config" for name in ws.tools)
    for name, tool in ws.tools.items():
        assert tool["annotations"]["readOnlyHint"] is True, name


def test_read_only_hides_writing_and_process_tools(workspace) -> None:
    names = set(workspace(read_only=True, sandbox="none", allow_commands=["echo"]).tools)
    assert names == {
        "read_file",
        "read_multiple_files",
        "list_directory",
        "get_file_info",
        "start_search",
        "get_more_search_results",
        "stop_search",
        "list_searches",
        "get_config",
    }
    full = set(workspace(read_only=False, sandbox="none", allow_commands=["echo"]).tools)
    assert {"write_file", "edit_block", "create_directory", "move_file", "run_command", "start_process"} <= full


def test_every_tool_is_annotated_and_structured(workspace) -> None:
    tools = workspace(sandbox="none", allow_commands=["echo"]).tools
    for name, tool in tools.items():
        hints = tool["annotations"]
        assert set(hints) == {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}, name
        assert tool["outputSchema"]["type"] == "object", name
        assert tool["inputSchema"]["type"] == "object", name
    assert tools["write_file"]["annotations"]["destructiveHint"] is True
    assert tools["create_directory"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tools["run_command"]["annotations"]["openWorldHint"] is True


def test_invalid_arguments_are_tool_errors(workspace) -> None:
    ws = workspace()
    assert "missing required argument 'path'" in ws.error("read_file")
    assert "length must be of type integer" in ws.error("read_file", path="x", length="10")
    assert "unknown argument 'bogus'" in ws.error("read_file", path="x", bogus=1)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"roots": ["/definitely/not/here"]}, "is not a directory"),
        ({"sandbox": "docker"}, "sandbox must be auto, bwrap or none"),
        ({"allow_commands": ["no-such-program-xyz"]}, "is not an executable"),
        ({"allw_shell": True}, "unknown option(s) allw_shell"),
        ({"timeout": "5"}, "option timeout has the wrong type"),
    ],
)
def test_bad_configuration_is_a_config_error(options, message, root: Path) -> None:
    options.setdefault("roots", [str(root)])
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_workspace_server(**options)

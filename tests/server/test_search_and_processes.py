"""Background searches and process tools of the workspace server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.server.conftest import COMMANDS, SANDBOXES


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import os\nprint('Hello')\n")
    (root / "src" / "pkg" / "util.py").write_text("def hello():\n    return 'hello world'\n")
    (root / "README.md").write_text("# Hello\nsee src/\n")
    (root / "blob.bin").write_bytes(b"hello\0\1\2")
    return root


def test_search_files_by_glob(workspace, tree: Path) -> None:
    out = workspace().ok("start_search", pattern="*.py", wait_ms=5000)
    assert out["done"] is True and out["kind"] == "files"
    assert sorted(Path(r["path"]).name for r in out["results"]) == ["main.py", "util.py"]
    assert all(r["path"].startswith(str(tree.resolve())) for r in out["results"])
    nested = workspace().ok("start_search", pattern="src/pkg/*", wait_ms=5000)
    assert [Path(r["path"]).name for r in nested["results"]] == ["util.py"]


def test_search_content_plain_regex_and_case(workspace, tree: Path) -> None:
    ws = workspace()
    plain = ws.ok("start_search", pattern="hello", kind="content", wait_ms=5000)["results"]
    assert {(Path(r["path"]).name, r["line"]) for r in plain} == {
        ("main.py", 2),
        ("util.py", 1),
        ("util.py", 2),
        ("README.md", 1),
    }  # never the binary blob
    exact = ws.ok("start_search", pattern="Hello", kind="content", case_sensitive=True, wait_ms=5000)["results"]
    assert {Path(r["path"]).name for r in exact} == {"main.py", "README.md"}
    regex = ws.ok("start_search", pattern=r"^def \w+\(", kind="content", regex=True, file_pattern="*.py", wait_ms=5000)["results"]
    assert [(Path(r["path"]).name, r["text"]) for r in regex] == [("util.py", "def hello():")]
    assert "invalid regular expression" in ws.error("start_search", pattern="(", kind="content", regex=True)


def test_search_paging_limits_and_listing(workspace, root: Path) -> None:
    for i in range(30):
        (root / f"f{i:02}.log").write_text("x")
    ws = workspace(max_results=25)
    first = ws.ok("start_search", pattern="*.log", wait_ms=5000)
    assert first["totalResults"] == 25 and first["stoppedBy"] == "result limit of 25"
    page = ws.ok("get_more_search_results", search_id=first["searchId"], offset=20, limit=10)
    assert len(page["results"]) == 5 and "nextOffset" not in page
    listed = ws.ok("list_searches")["searches"]
    assert [s["searchId"] for s in listed] == [first["searchId"]] and listed[0]["done"] is True
    assert "no search with id" in ws.error("get_more_search_results", search_id="search-nope")


def test_search_runs_in_background_and_stops(workspace, root: Path) -> None:
    for d in range(40):
        (root / f"d{d}").mkdir()
        for f in range(50):
            (root / f"d{d}" / f"f{f}.txt").write_text("needle\n" * 20)
    ws = workspace()
    started = time.monotonic()
    first = ws.ok("start_search", pattern="needle", kind="content", wait_ms=0)
    assert time.monotonic() - started < 2  # the call returns while the search goes on
    stopped = ws.ok("stop_search", search_id=first["searchId"])
    assert stopped["done"] is True
    later = ws.ok("get_more_search_results", search_id=first["searchId"])
    assert later["totalResults"] == stopped["resultCount"] <= 1000


# ---------------------------------------------------------------------- processes
@pytest.fixture(params=SANDBOXES)
def runner(request, workspace):
    return workspace(sandbox=request.param, allow_commands=COMMANDS, timeout=20)


def test_run_command(runner, root: Path) -> None:
    (root / "data.txt").write_text("b\na\n")
    out = runner.ok("run_command", argv=["cat", "data.txt"])
    assert (out["output"], out["exitCode"], out["timedOut"], out["truncated"]) == ("b\na\n", 0, False, False)
    failed = runner.ok("run_command", argv=["ls", "missing"])
    assert failed["exitCode"] != 0 and "missing" in failed["output"]  # stderr merged in
    assert runner.ok("run_command", argv=["cat"], input="fed in")["output"] == "fed in"
    (root / "sub").mkdir()
    assert runner.ok("run_command", argv=["sh", "-c", "pwd"], cwd="sub")["output"].strip().endswith("/sub")
    assert "outside the workspace roots" in runner.error("run_command", argv=["ls"], cwd="/etc")


def test_interactive_process(runner) -> None:
    script = 'echo "name?"; read name; echo "hi $name"; read again; echo "bye $again"'
    started = runner.ok("start_process", argv=["sh", "-c", script], quiet_ms=200)
    assert started["output"] == "name?\n" and started["running"] is True
    handle = started["handle"]
    reply = runner.ok("interact_with_process", handle=handle, input="ada")
    assert reply["output"] == "hi ada\n"
    last = runner.ok("interact_with_process", handle=handle, input="now", wait_ms=3000)
    assert last["output"] == "bye now\n"
    deadline = time.monotonic() + 5
    while runner.ok("read_process_output", handle=handle)["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    everything = runner.ok("read_process_output", handle=handle)
    assert everything["output"] == "name?\nhi ada\nbye now\n" and everything["exitCode"] == 0
    page = runner.ok("read_process_output", handle=handle, offset=6, length=7)
    assert page["output"] == "hi ada\n" and page["nextOffset"] == 13
    listed = runner.ok("list_processes")["processes"]
    assert [p["handle"] for p in listed] == [handle] and listed[0]["running"] is False
    assert "no longer reads its input" in runner.error("interact_with_process", handle=handle, input="x")


def test_read_process_output_waits_for_more(runner) -> None:
    started = runner.ok("start_process", argv=["sh", "-c", "echo one; sleep 1; echo two"], quiet_ms=100)
    assert started["output"] == "one\n"
    more = runner.ok("read_process_output", handle=started["handle"], offset=started["nextOffset"], wait_ms=5000)
    assert more["output"] == "two\n"


def test_terminate_process(runner) -> None:
    started = runner.ok("start_process", argv=["sleep", "60"], wait_ms=100)
    status = runner.ok("terminate_process", handle=started["handle"])
    assert status["running"] is False and status["endedBy"] == "terminated"
    assert "no process with handle" in runner.error("terminate_process", handle="proc-nope")


def test_no_process_tools_without_a_sandbox_or_an_allow_list(workspace) -> None:
    """sandbox=auto without bwrap, or an empty allow-list: nothing could run, so no process tool
    is offered, and get_config says why."""
    empty = workspace(sandbox="none")
    assert "run_command" not in empty.tools
    assert "allow_commands is empty" in empty.ok("get_config")["processes"]["note"]
    if "bwrap" not in SANDBOXES:
        auto = workspace(sandbox="auto", allow_commands=["echo"])
        assert "run_command" not in auto.tools and "bwrap" in auto.ok("get_config")["processes"]["note"]


def test_auto_sandbox_without_bwrap_turns_processes_off(root: Path) -> None:
    """A host without bubblewrap (simulated by clearing what find_bwrap found): sandbox=auto offers
    no process tool; only an explicit sandbox="none" runs processes unsandboxed."""
    from llmc_cli.server.processes import Launcher, ProcessConfig

    launcher = Launcher(ProcessConfig(roots=[str(root)], allow_commands=["echo"], sandbox="auto"))
    launcher.bwrap = None
    assert launcher.sandbox == "off" and launcher.enabled()[0] is False
    assert "bubblewrap" in launcher.enabled()[1]
    explicit = Launcher(ProcessConfig(roots=[str(root)], allow_commands=["echo"], sandbox="none"))
    assert explicit.sandbox == "none" and explicit.enabled() == (True, "processes run WITHOUT a sandbox")

"""Issue 39, the smaller items: the profile named instead of null, a resource_link's URI and name
in --text, `servers list` on a terminal (elided paths, how each server runs), `audit tail -f`'s
one header and its quiet Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import llmc, node_tool, profile_file, wait_until
from tests.terminal import Terminal


def test_session_start_and_token_create_name_the_default_profile(isolated_dirs: Path) -> None:
    llmc("profiles", "init")
    started = llmc("session", "start", "s1", "-s", "workspace")
    try:
        assert started.returncode == 0, started.stderr
        assert started.json()["profile"] == "default"
    finally:
        llmc("session", "stop", "s1")
    token = llmc("serve", "token", "create", "laptop")
    assert token.returncode == 0, token.stderr
    assert token.json()["profile"] == "default"


@pytest.mark.e2e  # the npm reference server-everything
def test_a_resource_link_shows_its_name_and_uri_in_text() -> None:
    proc = llmc("call", "--stdio", node_tool("mcp-server-everything"), "get-resource-links", "count=1", "--text")
    assert proc.returncode == 0, proc.stderr
    assert "[resource_link Blob Resource 1: demo://resource/dynamic/blob/1]" in proc.stdout


@pytest.mark.e2e  # a pseudo-terminal
def test_servers_list_on_a_terminal_elides_long_paths_and_says_how_each_runs(isolated_dirs: Path) -> None:
    deep = isolated_dirs / "a" / "very" / "deep" / "directory" / "of" / "tools" / "bin"
    deep.mkdir(parents=True)
    program = deep / "mcp-server-notes"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert llmc("servers", "add", "notes", "--", str(program)).returncode == 0
    assert llmc("servers", "add", "bare", "--sandbox", "none", "--", "true").returncode == 0
    with Terminal("servers", "list", env={"COLUMNS": "200"}, stdout_on_terminal=True) as term:
        assert term.wait() == 0, term.screen
    rows = {line.split()[0]: line for line in term.screen.splitlines() if line.split()}
    assert "runs" in rows["name"]
    assert "/…/" in rows["notes"] and "mcp-server-notes" in rows["notes"] and str(program) not in rows["notes"]
    assert "sandboxed" in rows["notes"] and "not sandboxed" in rows["bare"] and "in llmc" in rows["workspace"]


@pytest.mark.e2e  # a pseudo-terminal, Ctrl-C
def test_audit_tail_follow_prints_one_header_and_leaves_quietly(isolated_dirs: Path) -> None:
    profile_file(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n')
    assert llmc("call", "workspace.list_directory", "path=.").returncode == 0
    with Terminal("audit", "tail", "-f", "--format", "table", stdout_on_terminal=True) as term:
        term.expect("list_directory")
        for _ in range(2):  # records that come while it follows
            assert llmc("call", "workspace.list_directory", "path=.").returncode == 0

        def seen_all() -> bool:
            term._read(0.2)  # what it printed so far
            return term.screen.count("list_directory") >= 6  # a decision and an outcome per call

        assert wait_until(seen_all, 30), term.screen
        term.interrupt()
        code = term.wait()
    assert code == 130, term.screen
    assert term.screen.count("durationMs") == 1, term.screen  # one header
    assert "Traceback" not in term.screen and "KeyboardInterrupt" not in term.screen

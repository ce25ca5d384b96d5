"""Issue 39, "The sandbox meets real servers": `servers add`/`import` declare the paths a server's
arguments name (directories read-write, files read-only), refuse the ones no server should get,
give the network only to package runners that download at start, and a sandboxed server that
exits at start over a path says what it sees and how to add one. A crashed server is reported by
the line that says what went wrong, in the CLI and in the gateway's log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from llmc_cli.mcp.transports.crash_lines import telling_line
from tests.helpers import llmc, llmc_executable, node_tool
from tests.sandbox.conftest import BWRAP

FS = node_tool("mcp-server-filesystem")


def test_the_readme_way_declares_the_directory_and_gives_npx_the_network(tmp_path: Path) -> None:
    data = tmp_path / "srv" / "data"
    data.mkdir(parents=True)
    added = llmc("servers", "add", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", str(data))
    assert added.returncode == 0, added.stderr
    server = added.json()["server"]
    assert server["write_paths"] == [str(data)] and "read_paths" not in server
    assert server["network"] is True  # npx downloads the package at start
    said = [line for line in added.stderr.splitlines() if "sees the paths" in line]
    assert len(said) == 1 and str(data) in said[0] and "--write-path" in said[0]


@pytest.mark.e2e  # the npm server-filesystem, in bubblewrap
def test_an_added_filesystem_server_sees_its_directory(tmp_path: Path) -> None:
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed")
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("hi\n")
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\n")
    added = llmc("servers", "add", "fs", "--", FS, str(data), str(notes))
    assert added.returncode == 0, added.stderr
    server = added.json()["server"]
    assert (server["write_paths"], server["read_paths"], server["network"]) == ([str(data)], [str(notes)], False)
    listed = llmc("call", "fs.list_directory", f"path={data}")
    assert listed.returncode == 0, listed.stderr
    assert "hello.txt" in json.dumps(listed.json()["content"])


def test_paths_no_server_should_get_are_skipped_with_a_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "config").mkdir()
    (tmp_path / "root-link").symlink_to("/")
    kept = tmp_path / "kept"
    kept.mkdir()
    argv = [str(tmp_path / "root-link"), "/proc/self", str(home), str(tmp_path / "config"), "/usr/share", str(kept), "/"]
    added = llmc("servers", "add", "x", "--", "/usr/bin/env", *argv)
    assert added.returncode == 0, added.stderr
    server = added.json()["server"]
    assert server["write_paths"] == [str(kept)] and "read_paths" not in server
    assert server["network"] is False  # an installed program
    skipped = [line for line in added.stderr.splitlines() if "not declared" in line]
    assert len(skipped) == 1, added.stderr
    for reason in ("the whole file system", "a kernel file system", "the home directory itself", "llmc's own files"):
        assert reason in skipped[0]


def test_read_and_write_path_options_override_and_network_options_win(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    added = llmc("servers", "add", "x", "--read-path", str(data), "--network", "--", "/usr/bin/env", str(data), "/tmp")
    server = added.json()["server"]
    assert server["read_paths"] == [str(data)] and "write_paths" not in server and server["network"] is True
    assert "sees the paths" not in added.stderr
    runner = llmc("servers", "add", "y", "--no-network", "--", "uvx", "mcp-server-fetch")
    assert runner.json()["server"]["network"] is False


@pytest.mark.parametrize(
    "argv, network",
    [
        (["npx", "-y", "pkg"], True),
        (["uvx", "mcp-server-git"], True),
        (["pipx", "run", "pkg"], True),
        (["bunx", "pkg"], True),
        (["npm", "exec", "--yes", "pkg"], True),
        (["pnpm", "dlx", "pkg"], True),
        (["yarn", "dlx", "pkg"], True),
        (["docker", "run", "-i", "--rm", "mcp/fetch"], True),
        (["sh", "-c", "pip install mcp-server-x && mcp-server-x"], True),
        (["mcp-server-git", "--repository", "."], False),
        (["/usr/bin/python3", "-m", "server"], False),
        (["node", "server.js"], False),
    ],
)
def test_only_a_package_runner_gets_the_network(argv: list[str], network: bool) -> None:
    added = llmc("servers", "add", "s", "--", *argv)
    assert added.returncode == 0, added.stderr
    assert added.json()["server"]["network"] is network


def test_import_declares_each_servers_paths(tmp_path: Path) -> None:
    data = tmp_path / "Desktop"
    data.mkdir()
    config = tmp_path / "claude.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", str(data)]},
                    "git": {"command": "mcp-server-git", "args": ["--repository", str(tmp_path / "missing")]},
                }
            }
        )
    )
    imported = llmc("servers", "import", str(config))
    assert imported.returncode == 0, imported.stderr
    servers = imported.json()["servers"]
    assert servers["fs"]["write_paths"] == [str(data)] and servers["fs"]["network"] is True
    assert "write_paths" not in servers["git"] and servers["git"]["network"] is False
    assert f"server fs sees the paths its arguments name (write {data})" in imported.stderr


@pytest.mark.e2e  # the npm server-filesystem, in bubblewrap
def test_a_sandboxed_server_missing_a_path_says_what_it_sees_and_how_to_add_one(tmp_path: Path) -> None:
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed")
    seen = tmp_path / "seen"
    seen.mkdir()
    llmc("servers", "add", "fs", "--write-path", str(seen), "--", FS, str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()  # exists now, but the sandbox does not show it
    called = llmc("call", "fs.list_allowed_directories")
    assert called.returncode == 5, called.stderr
    first = called.stderr.splitlines()[0]
    assert "Error: None of the specified directories are accessible" in first
    assert f"sandboxed and sees write {seen}" in first and "write_paths" in first and "--write-path" in first


def test_a_crashed_server_is_reported_by_its_error_line(tmp_path: Path) -> None:
    crash = tmp_path / "crash.js"
    crash.write_text("require('/nonexistent/module-x');\n")
    called = llmc("call", "--stdio", f"node {crash}", "x.y")
    assert called.returncode == 5
    first = called.stderr.splitlines()[0]
    assert "Error: Cannot find module '/nonexistent/module-x'" in first, called.stderr
    assert "Node.js v" not in first


@pytest.mark.e2e  # the gateway on stdio takes over the process's file descriptors
def test_the_gateway_logs_the_same_line(tmp_path: Path) -> None:
    crash = tmp_path / "crash.js"
    crash.write_text("require('/nonexistent/module-x');\n")
    profile = tmp_path / "p.toml"
    profile.write_text(f'[servers.broken]\ncommand = "node"\nargs = [{json.dumps(str(crash))}]\n')
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with subprocess.Popen(
        [llmc_executable(), "serve", "-p", str(profile)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        for _ in range(2):  # the two answers: the tools are listed once the server has failed
            assert proc.stdout.readline()
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=30)
    logged = [line for line in err.splitlines() if "broken is unavailable" in line]
    assert logged and "Error: Cannot find module '/nonexistent/module-x'" in logged[0], err


@pytest.mark.parametrize(
    "lines, expected",
    [
        (
            [
                "Traceback (most recent call last):",
                '  File "s.py", line 1',
                "    import x",
                "ModuleNotFoundError: No module named 'x'",
            ],
            "ModuleNotFoundError: No module named 'x'",
        ),
        (["usage: srv [-h]", "srv: error: unrecognized arguments: --bad"], "srv: error: unrecognized arguments: --bad"),
        (
            [
                "npm error code E404",
                "npm error 404 Not Found - GET https://example.invalid/pkg",
                "npm error A complete log of this run can be found in: /x.log",
            ],
            "npm error 404 Not Found - GET https://example.invalid/pkg",
        ),
        (["starting", "listening on stdio", "bye"], "bye"),
        (["Error: boom", "    at main (/s.js:1:1)", "}", "", "Node.js v20.20.2"], "Error: boom"),
        ([], None),
    ],
)
def test_the_telling_line(lines: list[str], expected: str | None) -> None:
    assert telling_line(lines) == expected


def test_the_home_directory_is_not_an_argument_path_to_declare() -> None:
    home = os.path.expanduser("~")
    added = llmc("servers", "add", "h", "--", "/usr/bin/env", home)
    assert "write_paths" not in added.json()["server"]

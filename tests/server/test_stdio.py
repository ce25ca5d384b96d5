"""`llmc serve workspace` over stdio: driven by the official `mcp` SDK client (both eras) to
prove interoperability, and byte by byte to prove stdout carries MCP messages only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.helpers import llmc_executable, llmc_process

# Processes: `serve workspace` owns the process's stdio (fd 1 goes to stderr, replies to a dup of it).


def _serve_args(root: Path, *extra: str) -> list[str]:
    return ["serve", "workspace", "--root", str(root), *extra]


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_sdk_client_over_stdio(root: Path, mode: str, version: str) -> None:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    (root / "notes.txt").write_text("alpha\nbeta\n")
    params = StdioServerParameters(
        command=llmc_executable(),
        args=_serve_args(root, "--read-only"),
        env={k: v for k, v in os.environ.items() if k.startswith("LLMC_")},
    )

    async def session() -> None:
        with anyio.fail_after(60):
            await talk()

    async def talk() -> None:
        async with Client(params, mode=mode) as client:
            assert client.session.protocol_version == version
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert "read_file" in names and "write_file" not in names  # --read-only
            read = next(t for t in tools if t.name == "read_file")
            assert read.annotations.read_only_hint is True and read.output_schema["type"] == "object"
            result = await client.call_tool("read_file", {"path": "notes.txt", "offset": 1})
            assert result.is_error is False  # the SDK also validated structuredContent against outputSchema
            assert result.structured_content["content"] == "beta\n" and result.structured_content["totalLines"] == 2
            refused = await client.call_tool("read_file", {"path": "/etc/passwd"})
            assert refused.is_error is True and "outside the workspace roots" in refused.content[0].text

    anyio.run(session)


def test_stdout_carries_only_messages_and_eof_ends_the_server(root: Path) -> None:
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            }
        ),
        "this is not json",
        "[" * 100_000 + "]" * 100_000,  # valid JSON too deep for the parser: a parse error, not a crash
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_directory", "arguments": {}}}),
        json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"bogus": True}]),
    ]
    proc = llmc_process(*_serve_args(root, "--read-only"), stdin="\n".join(lines) + "\n", timeout=30)  # no hang
    assert proc.returncode == 0
    replies = [json.loads(line) for line in proc.stdout.splitlines()]  # every line is JSON
    by_id = {r.get("id"): r for r in replies}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    assert by_id[2]["result"]["isError"] is False
    assert by_id[3]["result"] == {}
    codes = sorted(r["error"]["code"] for r in replies if r.get("id") is None)
    assert codes == [-32700, -32700, -32600]
    assert "llmc-workspace:" in proc.stderr  # people's messages go to stderr


def test_bad_configuration_exits_3(tmp_path: Path) -> None:
    proc = llmc_process("serve", "workspace", "--root", str(tmp_path / "missing"), timeout=30)
    assert proc.returncode == 3 and proc.stdout == ""
    assert "is not a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_serve_help_lists_the_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "llmc_cli", "serve", "workspace", "--help"], capture_output=True, text=True, timeout=30
    ).stdout
    for option in ("--root", "--read-only", "--allow-command", "--sandbox"):
        assert option in out

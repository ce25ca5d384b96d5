"""The npm reference server `@modelcontextprotocol/server-everything` in its `sse` and
`streamableHttp` modes, through `llmc` with --transport auto and through the session."""

from __future__ import annotations

import json

import pytest

from llmc_cli.mcp.client import connect
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.transports.legacy_sse import LegacySseTransport
from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport
from llmc_cli.model import ServerSpec
from tests.helpers import llmc

pytestmark = pytest.mark.e2e  # the npm reference server-everything over HTTP


@pytest.mark.parametrize(("server", "transport"), [("everything_http", "http"), ("everything_sse", "sse")])
def test_llmc_tools_list_and_call_with_auto_transport(server, transport, request, isolated_dirs):
    url = request.getfixturevalue(server)
    listed = llmc("tools", "list", "--url", url)
    assert listed.returncode == 0, listed.stderr
    assert "get-sum" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = llmc("call", "get-sum", "a=2", "b=3", "--yes", "--text", "--url", url)
    assert called.returncode == 0, called.stderr
    assert "5" in called.stdout
    entry = json.loads((isolated_dirs / "state" / "servers.json").read_text())[ServerSpec(name="s", url=url).cache_key()]
    assert (entry["transport"], entry["era"]) == (transport, "legacy")


def test_streamable_http_session_with_progress(everything_http):
    progress: list[dict] = []
    hooks = ClientHooks(on_progress=progress.append)
    with connect(ServerSpec("ev", url=everything_http, timeout=30), hooks=hooks) as session:
        assert isinstance(session.transport, StreamableHttpTransport)
        assert session.era == "legacy" and session.transport.session_id
        tools = {t["name"] for t in session.list_tools()}
        slow = "trigger-long-running-operation"
        assert slow in tools
        result = session.call_tool(slow, {"duration": 1, "steps": 3})
        assert not result.get("isError"), result
        assert [p["progress"] for p in progress] == [1, 2, 3]


def test_http_sse_session(everything_sse):
    with connect(ServerSpec("ev", url=everything_sse, timeout=30)) as session:
        assert isinstance(session.transport, LegacySseTransport)
        assert session.call_tool("echo", {"message": "über"})["content"][0]["text"].endswith("über")

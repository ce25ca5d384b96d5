"""The generic server core, message by message: both eras, negotiation, errors, pagination,
cancellation. Modern replies are validated against the 2026-07-28 schema.json when the spec
folder is present (those checks are skipped, not the tests, when it is not)."""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.server import McpServer, ToolDef, ToolError
from llmc_cli.server.workspace import make_workspace_server

SPEC = Path("/work/shared/mcp-spec")
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def conforms(version: str, definition: str, value: Any) -> None:
    defs = _spec_defs(version)
    if defs is None:
        return
    import jsonschema

    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": defs}).validate(value)


@functools.cache
def _spec_defs(version: str) -> dict[str, Any] | None:
    schema_file = SPEC / version / "schema.json"
    return json.loads(schema_file.read_text())["$defs"] if schema_file.exists() else None


class Wire:
    """Send one message, collect what comes back (from any thread)."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.replies: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.ids = 0

    def send(self, message: dict[str, Any]) -> None:
        with self.cond:
            self.replies.append(message)
            self.cond.notify_all()

    def request(self, method: str, params: dict[str, Any] | None = None, *, modern: bool = False) -> dict[str, Any]:
        self.ids += 1
        params = dict(params or {})
        if modern:
            params["_meta"] = {**MODERN_META, **params.get("_meta", {})}
        self.endpoint.handle(jsonrpc.request(self.ids, method, params), self.send)
        return self.wait(self.ids)

    def wait(self, msg_id: Any, timeout: float = 10) -> dict[str, Any]:
        with self.cond:
            assert self.cond.wait_for(lambda: any(r.get("id") == msg_id for r in self.replies), timeout)
            return next(r for r in self.replies if r.get("id") == msg_id)


@pytest.fixture
def wire(root: Path) -> Wire:
    (root / "a.txt").write_text("hello\n")
    endpoint = make_workspace_server([str(root)], True)
    yield Wire(endpoint)
    endpoint.close()


@pytest.mark.parametrize(
    "asked, agreed",
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25")],
)
def test_initialize_negotiates_a_legacy_version(wire: Wire, asked: str, agreed: str) -> None:
    reply = wire.request(
        "initialize", {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )
    result = reply["result"]
    assert result["protocolVersion"] == agreed
    assert result["serverInfo"]["name"] == "llmc-workspace" and result["capabilities"] == {"tools": {"listChanged": False}}
    conforms("2025-11-25", "InitializeResult", result)
    wire.endpoint.handle(jsonrpc.notification("notifications/initialized"), wire.send)
    tools = wire.request("tools/list")["result"]
    assert "resultType" not in tools and {t["name"] for t in tools["tools"]} >= {"read_file", "get_config"}
    conforms("2025-11-25", "ListToolsResult", tools)
    call = wire.request("tools/call", {"name": "read_file", "arguments": {"path": "a.txt"}})["result"]
    assert call["structuredContent"]["content"] == "hello\n" and call["content"] == [{"type": "text", "text": "hello\n"}]
    conforms("2025-11-25", "CallToolResult", call)
    assert wire.request("ping")["result"] == {}


def test_requests_before_initialize_without_meta_are_invalid(wire: Wire) -> None:
    error = wire.request("tools/list")["error"]
    assert error["code"] == jsonrpc.INVALID_PARAMS and "initialize" in error["message"]


def test_modern_discover_and_calls(wire: Wire) -> None:
    discover = wire.request("server/discover", modern=True)["result"]
    assert discover["supportedVersions"][0] == "2026-07-28" and "2025-11-25" in discover["supportedVersions"]
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "llmc-workspace"
    conforms("2026-07-28", "DiscoverResult", discover)
    tools = wire.request("tools/list", modern=True)["result"]
    assert tools["resultType"] == "complete" and tools["cacheScope"] == "private" and "ttlMs" in tools
    conforms("2026-07-28", "ListToolsResult", tools)
    call = wire.request("tools/call", {"name": "read_file", "arguments": {"path": "a.txt"}}, modern=True)["result"]
    assert call["resultType"] == "complete" and call["isError"] is False
    conforms("2026-07-28", "CallToolResult", call)
    failed = wire.request("tools/call", {"name": "read_file", "arguments": {"path": "/etc/passwd"}}, modern=True)
    assert failed["result"]["isError"] is True and "outside the workspace roots" in failed["result"]["content"][0]["text"]
    conforms("2026-07-28", "CallToolResult", failed["result"])


def test_unsupported_modern_version(wire: Wire) -> None:
    reply = wire.request("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}}, modern=True)
    error = reply["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "2030-01-01"
    assert error["data"]["supported"][0] == "2026-07-28"
    conforms("2026-07-28", "UnsupportedProtocolVersionError", reply)


INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def test_on_stdio_initialize_after_a_modern_request_is_refused_naming_the_modern_versions(root: Path) -> None:
    """A dual-era host whose server/discover probe timed out (a slow start) sends initialize,
    though the server took the probe: over stdio (one client) the server then says it serves
    2026-07-28 (UnsupportedProtocolVersion, as the mcp SDK's server does), so the host probes
    again and stays modern. Real pipes, the real stdio loop; both messages written before any
    reply is read, as the timed-out host does."""
    import os

    from llmc_cli.server.stdio import run_stdio

    endpoint = make_workspace_server([str(root)], True)
    to_server, from_host = os.pipe()
    to_host, from_server = os.pipe()
    with open(to_server, "rb", buffering=0) as stdin, open(from_server, "wb", buffering=0) as stdout:
        server = threading.Thread(target=run_stdio, args=(endpoint, stdin, stdout), daemon=True)
        server.start()
        with open(from_host, "wb", buffering=0) as host_out, open(to_host, "rb") as host_in:
            for message in (
                jsonrpc.request(1, "server/discover", {"_meta": MODERN_META}),
                jsonrpc.request(2, "initialize", INITIALIZE),
                jsonrpc.request(3, "server/discover", {"_meta": MODERN_META}),
                jsonrpc.request(4, "tools/list", {"_meta": MODERN_META}),
            ):
                host_out.write((json.dumps(message) + "\n").encode())
            replies = {reply["id"]: reply for reply in (json.loads(host_in.readline()) for _ in range(4))}
        server.join(10)
    assert replies[1]["result"]["supportedVersions"][0] == "2026-07-28"
    refused = replies[2]["error"]
    assert refused["code"] == -32022 and refused["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    conforms("2026-07-28", "UnsupportedProtocolVersionError", replies[2])
    assert replies[3]["result"]["supportedVersions"][0] == "2026-07-28"
    assert replies[4]["result"]["resultType"] == "complete" and replies[4]["result"]["tools"]


def test_a_connection_of_many_hosts_serves_initialize_after_modern_requests(wire: Wire) -> None:
    """Not on stdio (the core as the HTTP gateway holds it): both eras side by side, as the
    2026-07-28 versioning page allows a dual-era server."""
    assert wire.request("server/discover", modern=True)["result"]["supportedVersions"][0] == "2026-07-28"
    assert wire.request("initialize", INITIALIZE)["result"]["protocolVersion"] == "2025-11-25"


def test_modern_request_without_capabilities_is_invalid(wire: Wire) -> None:
    reply = wire.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert reply["error"]["code"] == jsonrpc.INVALID_PARAMS and "clientCapabilities" in reply["error"]["message"]


def test_protocol_errors(wire: Wire) -> None:
    assert wire.request("tools/call", {"name": "nope", "arguments": {}}, modern=True)["error"]["code"] == jsonrpc.INVALID_PARAMS
    assert wire.request("resources/list", modern=True)["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    assert wire.request("tools/list", {"cursor": "zz"}, modern=True)["error"]["code"] == jsonrpc.INVALID_PARAMS
    wire.endpoint.handle({"jsonrpc": "1.0", "id": 99, "method": "x"}, wire.send)
    assert wire.wait(99)["error"]["code"] == jsonrpc.INVALID_REQUEST


def test_pagination_and_cancellation() -> None:
    release = threading.Event()

    def slow(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return {"n": args.get("n", 0)}

    def fails(args: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("it broke")

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tools = [ToolDef(f"t{i}", "a tool", schema, slow) for i in range(5)] + [ToolDef("bad", "fails", schema, fails)]
    server = McpServer("test", "1", tools, page_size=2)
    wire = Wire(server)
    names, cursor = [], None
    for _ in range(10):
        page = wire.request("tools/list", {"cursor": cursor} if cursor else {}, modern=True)["result"]
        names += [t["name"] for t in page["tools"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert names == ["t0", "t1", "t2", "t3", "t4", "bad"]
    # A slow call does not block the server; a cancelled one never answers.
    server.handle(jsonrpc.request("slow-1", "tools/call", {"name": "t0", "arguments": {"n": 1}, "_meta": MODERN_META}), wire.send)
    server.handle(jsonrpc.request("slow-2", "tools/call", {"name": "t1", "arguments": {"n": 2}, "_meta": MODERN_META}), wire.send)
    server.handle(jsonrpc.notification("notifications/cancelled", {"requestId": "slow-1"}), wire.send)
    assert wire.request("tools/call", {"name": "bad", "arguments": {}}, modern=True)["result"]["content"][0]["text"] == "it broke"
    release.set()
    assert wire.wait("slow-2")["result"]["structuredContent"] == {"n": 2}
    server.close()
    assert not any(r.get("id") == "slow-1" for r in wire.replies)

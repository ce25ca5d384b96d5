"""Bad input through the gateway is refused, not run or crashed on: a host's tools/call (and
prompts/get, raw: the SDK sends only strings there) with arguments nested deeper than 64 levels gets the one message every path gives,
before any decision and without reaching the upstream; 900 levels (once a recursion traceback in
mask_secrets) the same; 100,000 levels (past the JSON parser) a parse error that says so. The
gateway keeps serving and its stderr holds no traceback. Real hosts: the `mcp` SDK client over
Streamable HTTP, both eras; raw HTTP for what the SDK cannot send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.model import ARGUMENTS_TOO_DEEP
from tests.gateway.conftest import audit_records
from tests.gateway.test_http import INIT, sdk_host, start, stop
from tests.gateway.test_stdio import ERAS, run


def nested(levels: int) -> dict[str, Any]:
    """An arguments object `levels` deep."""
    value: Any = "x"
    for _ in range(levels - 1):
        value = [value]
    return {"message": value}


@pytest.mark.parametrize("mode, version", ERAS)
def test_a_host_sending_arguments_too_deep_is_refused_with_the_one_message(
    gateway_profile: Path, tmp_path: Path, mode: str, version: str
) -> None:
    from mcp.shared.exceptions import MCPError

    gateway = start(gateway_profile)
    try:

        async def work() -> None:
            async with sdk_host(gateway.url, mode) as client:
                for levels in (65, 150):  # past that the SDK itself cannot serialize them
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool("sdk.add", nested(levels))
                    assert refused.value.message == ARGUMENTS_TOO_DEEP
                added = await client.call_tool("sdk.add", {"a": 1, "b": 2})  # and it still serves
                assert added.structured_content == {"result": 3}

        run(work)
    finally:
        stderr = stop(gateway)  # exit 0, no traceback
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    assert [r["tool"] for r in audit_records(tmp_path) if r["event"] == "decision"] == ["add"]  # only the good call


def test_raw_requests_nested_past_the_parser_get_one_line_and_no_traceback(gateway_profile: Path, tmp_path: Path) -> None:
    gateway = start(gateway_profile)
    try:
        status, headers, _ = gateway.request("POST", "/mcp", INIT)
        assert status == 200
        session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        gateway.request("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        deep = '{"message": ' + "[" * 100_000 + "]" * 100_000 + "}"
        body = (
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sdk.add", "arguments": ' + deep + "}}"
        ).encode()
        status, _, reply = gateway.request("POST", "/mcp", body, session)
        assert status == 400 and b"nested more than" in reply and len(reply.splitlines()) == 1
        for request_id, method, levels in ((3, "tools/call", 65), (4, "tools/call", 900), (5, "prompts/get", 65)):
            name = "sdk.add" if method == "tools/call" else "sdk.review"
            call = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"name": name, "arguments": nested(levels)}}
            status, _, reply = gateway.request("POST", "/mcp", json.dumps(call).encode(), session)
            text = reply.decode()
            assert status == 200 and ARGUMENTS_TOO_DEEP in text and f'"id":{request_id}' in text.replace(" ", "")
    finally:
        stderr = stop(gateway)
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    assert not [r for r in audit_records(tmp_path) if r["event"] == "decision"]

"""`llmc serve -p PROFILE` on stdio, with the official `mcp` SDK client as the host (both eras)
and llmc itself as a host, in front of real upstreams (tests/gateway/conftest.py)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.gateway.conftest import audit_records
from tests.helpers import llmc, llmc_executable

ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]


def host(profile: Path, mode: str, **options: Any) -> Any:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import Implementation

    params = StdioServerParameters(
        command=llmc_executable(),
        args=["serve", "-p", str(profile)],
        env={k: v for k, v in os.environ.items() if k.startswith("LLMC_") or k == "PATH"},
    )
    return Client(params, mode=mode, client_info=Implementation(name="test-host", version="9.9"), **options)


def run(work: Any) -> None:
    async def bounded() -> None:
        with anyio.fail_after(90):
            await work()

    anyio.run(bounded)


@pytest.mark.parametrize("mode, version", ERAS)
def test_sdk_host_lists_and_calls_the_namespaced_toolbox(gateway_profile: Path, tmp_path: Path, mode: str, version: str) -> None:
    async def work() -> None:
        async with host(gateway_profile, mode) as client:
            assert client.session.protocol_version == version
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"sdk.echo", "sdk.add", "sdk.weather", "ws.read_file", "ws.write_file"} <= set(tools)
            assert "sdk.crash" not in tools and not any(n.startswith("ws.run_") for n in tools)  # hidden
            assert tools["sdk.add"].annotations.read_only_hint is True  # the profile's hints
            added = await client.call_tool("sdk.add", {"a": 2, "b": 3})
            assert added.is_error is False and added.structured_content == {"result": 5}
            weather = await client.call_tool("sdk.weather", {"city": "Oslo"})
            assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
            read = await client.call_tool("ws.read_file", {"path": str(gateway_profile.parent / "ws/allowed/notes.txt")})
            assert read.is_error is False and read.structured_content["content"] == "alpha\n"
            resources = (await client.list_resources()).resources
            assert [r.uri for r in resources] == ["sdk.test://greeting"]
            contents = (await client.read_resource("sdk.test://greeting")).contents
            assert contents[0].text == "hello from a resource" and contents[0].uri == "sdk.test://greeting"
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["sdk.review"]
            prompt = await client.get_prompt("sdk.review", {"code": "x = 1"})
            assert "x = 1" in prompt.messages[0].content.text

    run(work)
    records = audit_records(tmp_path)
    outcomes = [r for r in records if r["event"] == "outcome"]
    assert {r.get("tool") or r.get("resource") or r.get("prompt") for r in outcomes} == {
        "add",
        "weather",
        "read_file",
        "test://greeting",
        "review",
    }
    for record in records:  # who asked: the host, by its clientInfo, on stdio
        assert record["client"] == {"name": "test-host", "version": "9.9", "transport": "stdio", "protocolVersion": version}
        assert record["command"] == "serve"


# A hidden tool is unknown whatever its spelling; the SDK raises the gateway's JSON-RPC error.
SPELLINGS = ["sdk.crash", "crash", "SDK.crash", "sdk.crash ", "sdk..crash", " sdk.crash", "ws.run_command", "sdk.nonexistent"]


@pytest.mark.parametrize("mode, version", ERAS)
def test_a_hidden_tool_cannot_be_called_by_any_spelling(gateway_profile: Path, mode: str, version: str) -> None:
    from mcp.shared.exceptions import MCPError

    async def work() -> None:
        async with host(gateway_profile, mode) as client:
            for name in SPELLINGS:
                with pytest.raises(MCPError, match="Unknown tool"):
                    await client.call_tool(name, {})

    run(work)


@pytest.mark.parametrize("mode, version", ERAS)
def test_an_argument_rule_holds_through_the_gateway(gateway_profile: Path, tmp_path: Path, mode: str, version: str) -> None:
    root = gateway_profile.parent / "ws"

    async def work() -> None:
        async with host(gateway_profile, mode) as client:
            for path in (root / "secret/key.txt", root / "allowed/../secret/key.txt"):
                refused = await client.call_tool("ws.read_file", {"path": str(path)})
                assert refused.is_error is True and "matches none of" in refused.content[0].text
                assert "hunter2" not in refused.content[0].text

    run(work)
    denied = [r for r in audit_records(tmp_path) if r.get("decision") == "deny"]
    assert len(denied) == 2 and all(r["rule"] == "args.ws.read_file.path" for r in denied)


def accept(answer: str, seen: list[str]) -> Any:
    from mcp_types import ElicitResult

    async def callback(context: Any, params: Any) -> Any:
        seen.append(params.message)
        return ElicitResult(action=answer)

    return callback


@pytest.mark.parametrize("mode, version", ERAS)
@pytest.mark.parametrize("answer", ["accept", "decline"])
def test_a_destructive_call_is_confirmed_by_the_hosts_user(
    gateway_profile: Path, tmp_path: Path, mode: str, version: str, answer: str
) -> None:
    seen: list[str] = []

    async def work() -> None:
        async with host(gateway_profile, mode, elicitation_callback=accept(answer, seen)) as client:
            result = await client.call_tool("sdk.echo", {"message": "hi there"})
            if answer == "accept":
                assert result.is_error is False and result.structured_content == {"result": "hi there"}
            else:
                assert result.is_error is True and "refused by the user" in result.content[0].text

    run(work)
    assert seen == ['Run sdk.echo with message="hi there"?']
    decision = next(r for r in audit_records(tmp_path) if r["event"] == "decision")
    assert decision["decision"] == ("allow" if answer == "accept" else "deny")
    assert decision["rule"] == ("confirm_destructive (confirmed)" if answer == "accept" else "confirm_destructive (refused)")


@pytest.mark.parametrize("mode, version", ERAS)
def test_a_host_that_cannot_be_asked_is_told_how_to_pre_approve(
    gateway_profile: Path, tmp_path: Path, mode: str, version: str
) -> None:
    async def work() -> None:
        async with host(gateway_profile, mode) as client:
            result = await client.call_tool("sdk.echo", {"message": "hi"})
            assert result.is_error is True
            text = result.content[0].text
            assert "declares no elicitation" in text and "policy approve sdk.echo" in text
            # the command it names works: approve, and the same call runs
            argv = shlex.split(text.split("pre-approve this exact call: ")[1].split(" (hmac-sha256:")[0])
            assert argv[0] == "llmc"
            approved = llmc(*argv[1:])
            assert approved.returncode == 0, approved.stderr

    run(work)

    async def again() -> None:
        async with host(gateway_profile, mode) as client:
            result = await client.call_tool("sdk.echo", {"message": "hi"})
            assert result.is_error is False and result.structured_content == {"result": "hi"}

    run(again)
    decisions = [r["rule"] for r in audit_records(tmp_path) if r["event"] == "decision"]
    assert decisions == ["confirm_destructive", "approved"]


def test_llmc_is_a_host_too(gateway_profile: Path) -> None:
    gateway = f"{shlex.quote(llmc_executable())} serve -p {shlex.quote(str(gateway_profile))}"
    listed = llmc("tools", "list", "--stdio", gateway)
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert "sdk.add" in names and "sdk.crash" not in names
    called = llmc("call", "--stdio", gateway, "sdk.add", "a=20", "b=22")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"] == {"result": 42}

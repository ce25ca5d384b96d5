"""`[serve] tool_search = true`: a real `mcp` SDK host sees llmc.search_tools, llmc.call_tool and
the pinned tools; llmc.call_tool runs the named tool through the path of a direct call (policy,
confirmation by the host's user, audit naming the real tool); a principal finds only its
profile's tools."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_http import sdk_host, start, stop
from tests.gateway.test_stdio import ERAS, accept, host, run
from tests.helpers import llmc

SEARCH = '\n[serve]\ntool_search = true\npinned = ["sdk.weather"]\n\n[policy.tool_calls_per_minute]\n"sdk.weather" = 1\n'


def found(result) -> list[str]:
    assert result.is_error is False, result.content
    return [row["name"] for row in result.structured_content["tools"]]


@pytest.mark.parametrize("mode, version", ERAS)
def test_a_host_searches_then_calls_through_the_policy(gateway_profile: Path, tmp_path: Path, mode: str, version: str) -> None:
    from mcp.shared.exceptions import MCPError

    with gateway_profile.open("a") as fh:
        fh.write(SEARCH)
    seen: list[str] = []

    async def work() -> None:
        async with host(gateway_profile, mode, elicitation_callback=accept("accept", seen)) as client:
            assert client.session.protocol_version == version
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"llmc.search_tools", "llmc.call_tool", "sdk.weather"}
            assert found(await client.call_tool("llmc.search_tools", {"query": "add two integers"}))[0] == "sdk.add"
            rows = (await client.call_tool("llmc.search_tools", {"query": "echo a message", "limit": 2})).structured_content[
                "tools"
            ]
            assert rows[0]["name"] == "sdk.echo" and rows[0]["inputSchema"]["required"] == ["message"]
            assert len(rows) <= 2
            crash = found(await client.call_tool("llmc.search_tools", {"query": "exit the server crash", "limit": 20}))
            assert "sdk.crash" not in crash  # denied by the policy: never found
            added = await client.call_tool("llmc.call_tool", {"name": "sdk.add", "arguments": {"a": 40, "b": 2}})
            assert added.structured_content == {"result": 42}
            echoed = await client.call_tool("llmc.call_tool", {"name": "sdk.echo", "arguments": {"message": "hi"}})
            assert echoed.is_error is False and echoed.structured_content == {"result": "hi"}  # confirmed first
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("llmc.call_tool", {"name": "sdk.crash", "arguments": {}})
            weather = {"name": "sdk.weather", "arguments": {"city": "Oslo"}}
            assert (await client.call_tool("llmc.call_tool", weather)).is_error is False
            limited = await client.call_tool("llmc.call_tool", weather)  # the tool's own rate limit
            assert limited.is_error and "rate limit" in limited.content[0].text
            bad = await client.call_tool("llmc.call_tool", {"name": "llmc.call_tool", "arguments": {}})
            assert bad.is_error and "needs `name`" in bad.content[0].text
            bad = await client.call_tool("llmc.search_tools", {"query": " "})
            assert bad.is_error and "non-empty" in bad.content[0].text

    run(work)
    assert seen == ['Run sdk.echo with message="hi"?']
    for _ in range(50):  # outcome records reach the disk within a second
        records = audit_records(tmp_path)
        if len([r for r in records if r["event"] == "outcome"]) == 4:
            break
        time.sleep(0.1)
    assert [(r["server"], r["tool"], r["outcome"]) for r in records if r["event"] == "outcome"] == [
        ("sdk", "add", "ok"),
        ("sdk", "echo", "ok"),
        ("sdk", "weather", "ok"),
        ("sdk", "weather", "denied"),
    ]
    denied = [r for r in records if r["event"] == "decision" and r["tool"] == "crash"]
    assert denied and denied[0]["decision"] == "deny"


def test_a_principal_finds_only_its_profiles_tools(gateway_profile: Path) -> None:
    config = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    config.mkdir(parents=True)
    sdk = gateway_profile.read_text().split("[servers.sdk]\n")[1].split("\n\n")[0]
    (config / "ci-only.toml").write_text(
        "[servers.sdk]\n"
        + sdk
        + '\n\n[policy]\ndefault = "deny"\nallow = ["sdk.add"]\n\n[policy.hints."sdk.add"]\nreadOnly = true\n'
    )
    with gateway_profile.open("a") as fh:  # before `token create`, which adds to [serve]
        fh.write(SEARCH)
    created = llmc("serve", "-p", str(gateway_profile), "token", "create", "ops")
    assert created.returncode == 0, created.stderr
    ops_token = json.loads(created.stdout)["token"]
    with gateway_profile.open("a") as fh:
        fh.write('\n[serve.principals.ci]\ntoken_env = "GW_CI_TOKEN"\nprofile = "ci-only"\n')
    ci_token = "ci-token-0123456789abcdef"
    running = start(gateway_profile, env={"GW_CI_TOKEN": ci_token})
    try:

        async def work() -> None:
            async with sdk_host(running.url, "legacy", ops_token) as client:
                assert "sdk.echo" in found(await client.call_tool("llmc.search_tools", {"query": "echo", "limit": 20}))
            async with sdk_host(running.url, "legacy", ci_token) as client:
                assert {t.name for t in (await client.list_tools()).tools} == {"llmc.search_tools", "llmc.call_tool"}
                assert found(await client.call_tool("llmc.search_tools", {"query": "echo a message add", "limit": 20})) == [
                    "sdk.add"
                ]
                added = await client.call_tool("llmc.call_tool", {"name": "sdk.add", "arguments": {"a": 1, "b": 1}})
                assert added.structured_content == {"result": 2}

        run(work)
    finally:
        stop(running)


def test_a_server_named_llmc_is_refused_with_tool_search(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[servers.llmc]\ncommand = "true"\n\n[serve]\ntool_search = true\n')
    listed = llmc("-p", str(path), "tools", "list")
    assert listed.returncode == 3 and "a server named 'llmc' would clash" in listed.stderr

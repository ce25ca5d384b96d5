"""The gateway governs resources and prompts like tools: what the profile's policy denies is absent
from resources/list, resources/templates/list and prompts/list, and a resources/read, prompts/get
or completion of it gets the spec's "not found" error, as a name no server has would; every read
and get has a decision and an outcome record with the host's identity. Real `mcp` SDK hosts (stdio,
both eras; HTTP with two principals) in front of the SDK library server (tests/peers/sdk_library.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_http import Gateway, sdk_host, start, stop
from tests.gateway.test_stdio import ERAS, host, run
from tests.helpers import sdk_server

SERVERS = """
[servers.lib]
command = {python}
args = [{library}]
sandbox = "none"  # reads is tested here, confinement in tests/sandbox; a gateway with principals needs it said

[servers.kb]
command = {python}
args = [{library}]
sandbox = "none"  # reads is tested here, confinement in tests/sandbox; a gateway with principals needs it said
"""

# kb is denied as a whole; lib's private resources and its login prompt are denied by their rules
POLICY = """
[policy]
deny = ["kb.*"]

[policy.resources]
deny = ["lib.lib://private/*"]

[policy.prompts]
deny = ["lib.login"]
"""

NOT_FOUND = {"2026-07-28": -32602, "2025-11-25": -32002}  # resources/read, per era (server/resources.mdx)


def servers() -> str:
    return SERVERS.format(python=json.dumps(sys.executable), library=json.dumps(sdk_server("sdk_library.py")[1]))


@pytest.fixture
def library(tmp_path: Path) -> Path:
    path = tmp_path / "library.toml"
    path.write_text(servers() + POLICY)
    return path


@pytest.mark.parametrize("mode, version", ERAS)
def test_hidden_resources_and_prompts_are_absent_and_refused(library: Path, tmp_path: Path, mode: str, version: str) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import PromptReference, ResourceTemplateReference

    async def work() -> None:
        async with host(library, mode) as client:
            assert [r.uri for r in (await client.list_resources()).resources] == ["lib.lib://public/readme"]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["lib.lib://public/{name}"]
            assert [p.name for p in (await client.list_prompts()).prompts] == ["lib.summarize"]
            read = await client.read_resource("lib.lib://public/readme")
            assert read.contents[0].text == "public readme" and read.contents[0].uri == "lib.lib://public/readme"
            assert (await client.read_resource("lib.lib://public/faq")).contents[0].text == "public document faq"
            got = await client.get_prompt("lib.summarize", {"topic": "tides"})
            assert "Summarize tides" in got.messages[0].content.text
            # denied, hidden, or unknown: the same error, whatever the spelling
            for uri in (
                "kb.lib://public/readme",
                "lib.lib://private/salaries",
                "lib.lib://private/x",
                "nosuch.lib://public/readme",
            ):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                assert refused.value.code == NOT_FOUND[version] and "Resource not found" in refused.value.error.message
            for name, arguments in (
                ("kb.summarize", {"topic": "x"}),
                ("lib.login", {"user": "a", "api_key": "b"}),
                ("nosuch.summarize", {}),
            ):
                with pytest.raises(MCPError, match=f"Unknown prompt: {name}") as refused:
                    await client.get_prompt(name, arguments)
                assert refused.value.code == -32602
            with pytest.raises(MCPError, match="Unknown prompt"):
                await client.complete(PromptReference(type="ref/prompt", name="lib.login"), {"name": "user", "value": "a"})
            with pytest.raises(MCPError, match="Resource not found"):
                await client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="lib.lib://private/{name}"), {"name": "name", "value": "s"}
                )

    run(work)
    records = [r for r in audit_records(tmp_path) if "completion" not in r]  # completions: test_completions.py
    reads = [(r.get("server"), r.get("resource") or r.get("prompt"), r.get("decision") or r.get("outcome")) for r in records]
    assert reads == [
        ("lib", "lib://public/readme", "allow"),
        ("lib", "lib://public/readme", "ok"),
        ("lib", "lib://public/faq", "allow"),
        ("lib", "lib://public/faq", "ok"),
        ("lib", "summarize", "allow"),
        ("lib", "summarize", "ok"),
        ("kb", "lib://public/readme", "deny"),
        ("lib", "lib://private/salaries", "deny"),
        ("lib", "lib://private/x", "deny"),
        ("kb", "summarize", "deny"),
        ("lib", "login", "deny"),
    ]
    for record in records:
        assert record["command"] == "serve" and record["client"]["name"] == "test-host"
        assert record["client"]["protocolVersion"] == version
    login = records[-1]
    assert login["rule"] == "prompts.deny: lib.login" and login["arguments"] == {"user": "a", "api_key": "***"}


def two_principals(tmp_path: Path, guest: str = "") -> tuple[Gateway, dict[str, str]]:
    """A gateway over the served profile (everything) with two principals: `ops` gets it,
    `guest` a profile that denies kb and lib's private parts (`guest`: more of its table's
    lines). The running gateway (test_http.start) and each principal's token."""
    profiles = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "guest.toml").write_text(servers() + POLICY)
    served = tmp_path / "served.toml"
    served.write_text(
        servers() + '\n[serve.principals.ops]\ntoken_env = "GW_OPS"\n\n'
        f'[serve.principals.guest]\ntoken_env = "GW_GUEST"\nprofile = "guest"\n{guest}'
    )
    tokens = {"ops": "ops-token-0123456789abcdef", "guest": "guest-token-0123456789abcdef"}
    return start(served, env={"GW_OPS": tokens["ops"], "GW_GUEST": tokens["guest"]}), tokens


def test_each_principal_reads_what_its_profile_allows_over_http(tmp_path: Path) -> None:
    """Two principals of one gateway: `ops` gets the served profile (everything), `guest` a
    profile that denies kb and lib's private resources; each sees and reads only its own."""
    from mcp.shared.exceptions import MCPError

    running, tokens = two_principals(tmp_path)
    try:

        async def work() -> None:
            async with sdk_host(running.url, "auto", tokens["ops"]) as ops:
                assert len((await ops.list_resources()).resources) == 4
                assert (await ops.read_resource("kb.lib://private/salaries")).contents[0].text == "confidential salaries"
            async with sdk_host(running.url, "legacy", tokens["guest"]) as guest:
                assert [r.uri for r in (await guest.list_resources()).resources] == ["lib.lib://public/readme"]
                assert [p.name for p in (await guest.list_prompts()).prompts] == ["lib.summarize"]
                with pytest.raises(MCPError, match="Resource not found") as refused:
                    await guest.read_resource("kb.lib://private/salaries")
                assert refused.value.code == -32002
                with pytest.raises(MCPError, match="Unknown prompt"):
                    await guest.get_prompt("kb.login", {"user": "u", "api_key": "k"})
                assert (await guest.read_resource("lib.lib://public/readme")).contents[0].text == "public readme"

        run(work)
    finally:
        stop(running)
    for _ in range(50):  # outcome records reach the disk within a second
        records = audit_records(tmp_path)
        if len([r for r in records if r["event"] == "outcome"]) == 2:
            break
        time.sleep(0.1)
    seen = [
        (
            r["client"]["principal"],
            r["profile"],
            r["server"],
            r.get("resource") or r.get("prompt"),
            r.get("decision") or r.get("outcome"),
        )
        for r in records
    ]
    assert ("ops", "served", "kb", "lib://private/salaries", "ok") in seen
    assert ("guest", "guest", "kb", "lib://private/salaries", "deny") in seen
    assert ("guest", "guest", "kb", "login", "deny") in seen
    assert ("guest", "guest", "lib", "lib://public/readme", "ok") in seen
    assert not any(p == "guest" and d == "ok" and s == "kb" for p, _, s, _, d in seen)


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_a_hidden_resource_cannot_be_subscribed_to(library: Path) -> None:
    """resources/subscribe names the resource too: what the policy hides cannot be watched."""
    from mcp.shared.exceptions import MCPError

    async def work() -> None:
        async with host(library, "legacy") as client:
            with pytest.raises(MCPError, match="Resource not found"):
                await client.subscribe_resource("lib.lib://private/salaries")

    run(work)


def test_the_audit_trail_of_reads_verifies(library: Path, tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    from tests.helpers import llmc

    async def work() -> None:
        async with host(library, "legacy") as client:
            await client.read_resource("lib.lib://public/readme")
            with pytest.raises(MCPError, match="Resource not found"):
                await client.read_resource("kb.lib://public/readme")

    run(work)
    verified = llmc("-p", str(library), "audit", "verify")
    assert verified.returncode == 0, verified.stderr
    tail = llmc("-p", str(library), "audit", "tail", "--outcome", "denied", "--format", "jsonl")
    assert [(r["server"], r["resource"]) for r in tail.lines()] == [("kb", "lib://public/readme")]


def test_reads_through_the_gateway_count_against_the_rate_limit(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    profile = tmp_path / "limited.toml"
    profile.write_text(servers() + "\n[policy]\ncalls_per_minute = 1\n")

    async def work() -> None:
        async with host(profile, "legacy") as client:
            assert (await client.read_resource("lib.lib://public/readme")).contents[0].text == "public readme"
            with pytest.raises(MCPError, match="rate limit") as limited:
                await client.get_prompt("lib.summarize", {"topic": "x"})
            assert limited.value.error.data["retryAfter"] > 0

    run(work)
    outcomes = [(r.get("resource") or r.get("prompt"), r["outcome"]) for r in audit_records(tmp_path) if r["event"] == "outcome"]
    assert outcomes == [("lib://public/readme", "ok"), ("summarize", "denied")]

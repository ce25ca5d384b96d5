"""completion/complete through the gateway is a read of the prompt or resource template it
completes (services Pipeline): a decision and an outcome record with the host's identity, the
argument completed and its value so far (masked like a prompt's arguments); counted against the
profile's and the principal's rate limits; what the host's profile hides answered as what does
not exist, and recorded as denied. Real `mcp` SDK hosts (stdio, both eras; HTTP with two
principals) in front of the SDK library server (tests/peers/sdk_library.py), which completes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_http import sdk_host, stop
from tests.gateway.test_reads import NOT_FOUND, POLICY, servers, two_principals
from tests.gateway.test_stdio import ERAS, host, run
from tests.helpers import llmc


def completions(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [
        (r["server"], r.get("prompt") or r.get("resource"), r["completion"], r.get("decision") or r.get("outcome"))
        for r in records
        if "completion" in r
    ]


@pytest.mark.parametrize("mode, version", ERAS)
def test_completions_are_decided_and_recorded_like_reads(tmp_path: Path, mode: str, version: str) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import PromptReference, ResourceTemplateReference

    profile = tmp_path / "library.toml"
    profile.write_text(servers() + POLICY)

    async def work() -> None:
        async with host(profile, mode) as client:
            got = await client.complete(
                PromptReference(type="ref/prompt", name="lib.summarize"), {"name": "topic", "value": "ti"}
            )
            assert got.completion.values == ["tides", "tigers"]
            template = ResourceTemplateReference(type="ref/resource", uri="lib.lib://public/{name}")
            got = await client.complete(template, {"name": "name", "value": "f"}, context_arguments={"kind": "doc"})
            assert got.completion.values == ["faq"]
            with pytest.raises(MCPError, match="Unknown prompt") as refused:
                await client.complete(
                    PromptReference(type="ref/prompt", name="lib.login"), {"name": "api_key", "value": "sk-abc"}
                )
            assert refused.value.code == -32602
            hidden = ResourceTemplateReference(type="ref/resource", uri="lib.lib://private/{name}")
            with pytest.raises(MCPError, match="Resource not found") as refused:
                await client.complete(hidden, {"name": "name", "value": "s"})
            assert refused.value.code == NOT_FOUND[version]

    run(work)
    records = audit_records(tmp_path)
    assert completions(records) == [
        ("lib", "summarize", "topic", "allow"),
        ("lib", "summarize", "topic", "ok"),
        ("lib", "lib://public/{name}", "name", "allow"),
        ("lib", "lib://public/{name}", "name", "ok"),
        ("lib", "login", "api_key", "deny"),
        ("lib", "lib://private/{name}", "name", "deny"),
    ]
    completed = [r for r in records if "completion" in r]
    for record in completed:
        assert record["command"] == "serve" and record["client"]["name"] == "test-host"
        assert record["client"]["protocolVersion"] == version
    assert completed[0]["arguments"] == {"topic": "ti"} and completed[1]["resultBytes"] > 0
    assert completed[2]["arguments"] == {"kind": "doc", "name": "f"}
    assert completed[4]["rule"] == "prompts.deny: lib.login" and completed[4]["arguments"] == {"api_key": "***"}
    assert completed[5]["rule"] == "resources.deny: lib.lib://private/*"
    verified = llmc("-p", str(profile), "audit", "verify")
    assert verified.returncode == 0, verified.stderr


def test_completions_count_against_the_rate_limit(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import PromptReference

    profile = tmp_path / "limited.toml"
    profile.write_text(servers() + "\n[policy]\ncalls_per_minute = 2\n")
    ref = PromptReference(type="ref/prompt", name="lib.summarize")

    async def work() -> None:
        async with host(profile, "legacy") as client:
            for _ in range(2):
                assert (await client.complete(ref, {"name": "topic", "value": "t"})).completion.values
            with pytest.raises(MCPError, match="rate limit") as limited:
                await client.complete(ref, {"name": "topic", "value": "t"})
            assert limited.value.error.data["retryAfter"] > 0
            with pytest.raises(MCPError, match="rate limit"):  # and they count against the reads
                await client.get_prompt("lib.summarize", {"topic": "x"})

    run(work)
    outcomes = [(r.get("completion"), r["outcome"]) for r in audit_records(tmp_path) if r["event"] == "outcome"]
    assert outcomes == [("topic", "ok"), ("topic", "ok"), ("topic", "denied"), (None, "denied")]


def test_each_principal_completes_what_its_profile_shows_within_its_own_limit(tmp_path: Path) -> None:
    """`guest`'s profile denies kb and lib's login prompt: its completions of them are refused
    (and recorded as denied) where `ops` gets them; guest's own calls_per_minute holds its
    completions back too."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import PromptReference

    running, tokens = two_principals(tmp_path, guest="calls_per_minute = 2\n")
    login = PromptReference(type="ref/prompt", name="kb.login")
    try:

        async def work() -> None:
            async with sdk_host(running.url, "auto", tokens["ops"]) as ops:
                assert (await ops.complete(login, {"name": "user", "value": "a"})).completion.values == ["alice", "admin"]
            async with sdk_host(running.url, "legacy", tokens["guest"]) as guest:
                with pytest.raises(MCPError, match=r"Unknown prompt: kb\.login") as refused:
                    await guest.complete(login, {"name": "user", "value": "a"})
                assert refused.value.code == -32602
                summarize = PromptReference(type="ref/prompt", name="lib.summarize")
                for _ in range(2):
                    assert (await guest.complete(summarize, {"name": "topic", "value": "tr"})).completion.values == ["trees"]
                with pytest.raises(MCPError, match="rate limit"):
                    await guest.complete(summarize, {"name": "topic", "value": "tr"})

        run(work)
    finally:
        stop(running)
    for _ in range(50):  # outcome records reach the disk within a second
        records = audit_records(tmp_path)
        if len([r for r in records if r["event"] == "outcome"]) == 4:
            break
        time.sleep(0.1)
    # sorted: an outcome record may reach the disk after the next decision (group commit)
    seen = sorted((r["client"]["principal"], r["profile"], *row) for r, row in zip(records, completions(records), strict=True))
    assert seen == sorted(
        [
            ("ops", "served", "kb", "login", "user", "allow"),
            ("ops", "served", "kb", "login", "user", "ok"),
            ("guest", "guest", "kb", "login", "user", "deny"),
            ("guest", "guest", "lib", "summarize", "topic", "allow"),
            ("guest", "guest", "lib", "summarize", "topic", "ok"),
            ("guest", "guest", "lib", "summarize", "topic", "allow"),
            ("guest", "guest", "lib", "summarize", "topic", "ok"),
            ("guest", "guest", "lib", "summarize", "topic", "allow"),
            ("guest", "guest", "lib", "summarize", "topic", "denied"),
        ]
    )

"""[cache] through the gateway: a host's second identical call is answered from the cache and
audited `cached`, keyed by the principal (another principal's identical call asks the server).
Real `mcp` SDK hosts over HTTP in front of the counting SDK server (tests/peers/counting_server.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.gateway.conftest import audit_records
from tests.gateway.test_http import sdk_host, start, stop
from tests.gateway.test_stdio import run
from tests.helpers import sdk_server

TOKENS = {"GW_ALICE": "alice-token-0123456789abcdef", "GW_BOB": "bob-token-0123456789abcdef0"}


def test_a_second_identical_call_is_served_cached_per_principal(tmp_path: Path) -> None:
    profile = tmp_path / "gw.toml"
    profile.write_text(f"""
[servers.count]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("counting_server.py")[1])}]
env = {{ COUNT_FILE = {json.dumps(str(tmp_path / "calls.txt"))} }}
sandbox = "none"  # caching is tested here, confinement in tests/sandbox; a gateway with principals needs it said

[cache]
ttl_seconds = 300
tools = ["count.search"]

[serve.principals.alice]
token_env = "GW_ALICE"

[serve.principals.bob]
token_env = "GW_BOB"
""")
    gateway = start(profile, env=TOKENS)
    texts: list[str] = []
    try:

        async def work() -> None:
            for token in (TOKENS["GW_ALICE"], TOKENS["GW_ALICE"], TOKENS["GW_BOB"]):
                async with sdk_host(gateway.url, "auto", token) as client:
                    result = await client.call_tool("count.search", {"query": "tides"})
                    assert result.is_error is False
                    texts.append(result.content[0].text)

        run(work)
    finally:
        stop(gateway)
    # alice's second call is her first answer; bob's identical call reached the server
    assert texts == ["tides #1", "tides #1", "tides #2"]
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 2
    for _ in range(50):  # outcome records reach the disk within a second
        outcomes = [r for r in audit_records(tmp_path) if r["event"] == "outcome"]
        if len(outcomes) == 3:
            break
        time.sleep(0.1)
    assert [(r["client"]["principal"], r["outcome"]) for r in outcomes] == [("alice", "ok"), ("alice", "cached"), ("bob", "ok")]
    assert outcomes[1]["resultSha256"] == outcomes[0]["resultSha256"]
    decisions = [r for r in audit_records(tmp_path) if r["event"] == "decision"]
    assert [r["decision"] for r in decisions] == ["allow"] * 3  # the policy decided every call

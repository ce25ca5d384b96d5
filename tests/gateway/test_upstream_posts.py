"""The gateway posts a host's call to an HTTP upstream on the thread that serves the call
(StreamableHttpTransport.posts_on_caller_thread): no hand-off to a worker and back. What the
hand-off gave must still hold there: the upstream timeout ends the call (a timeout outcome, the
session's message) and a host's cancel ends it at once (a cancelled outcome, the upstream's
connection closed), whatever the upstream's era. Upstreams: the `mcp` SDK test server over
Streamable HTTP with JSON replies (a reply whose head only comes when the tool is done)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_stateful_upstreams import _sdk_http
from tests.gateway.test_stdio import host, run
from tests.helpers import free_port

PROFILE = """\
[servers.up]
url = "http://127.0.0.1:{port}/mcp"
timeout = {timeout}

[policy.hints]
"up.slow" = {{ readOnly = true }}
"up.add" = {{ readOnly = true }}
"""
UPSTREAMS = {"2026-07-28": ("--stateless", "--json"), "initialize-era": ("--legacy", "--json")}


@pytest.fixture(params=list(UPSTREAMS))
def profile(request: Any, tmp_path: Path) -> Iterator[Path]:
    port = free_port()
    upstream = _sdk_http(port, *UPSTREAMS[request.param], "--call-log", str(tmp_path / "calls.jsonl"))
    path = tmp_path / "posts.toml"
    path.write_text(PROFILE.format(port=port, timeout=20))
    try:
        yield path
    finally:
        upstream.kill()  # SIGTERM waits for the slow tool still running to finish (uvicorn's graceful stop)
        upstream.wait(timeout=30)


def outcome_of(tool: str, tmp_path: Path) -> dict[str, Any] | None:
    return next((r for r in audit_records(tmp_path) if r["event"] == "outcome" and r["tool"] == tool), None)


def test_the_upstream_timeout_ends_a_call_posted_on_the_hosts_thread(profile: Path, tmp_path: Path) -> None:
    profile.write_text(profile.read_text().replace("timeout = 20", "timeout = 1.5"))
    took: list[float] = []

    async def work() -> None:
        async with host(profile, "legacy") as client:
            started = time.monotonic()
            slow = await client.call_tool("up.slow", {"seconds": 30})
            took.append(time.monotonic() - started)
            assert slow.is_error is True
            assert "no reply to tools/call within 1.5s" in slow.content[0].text  # type: ignore[union-attr]
            assert (await client.call_tool("up.add", {"a": 1, "b": 2})).structured_content == {"result": 3}

    run(work)
    assert took[0] < 10
    outcome = outcome_of("slow", tmp_path)
    assert outcome is not None and outcome["outcome"] == "timeout", outcome


def test_a_hosts_cancel_ends_a_call_posted_on_its_thread_at_once(profile: Path, tmp_path: Path) -> None:
    """The upstream's timeout is 20 s and the tool takes 30: the cancel, sent once the upstream
    works on the call, must end the call before either (without a way to stop the POST, it ended
    as a timeout). The cancel waits for the upstream's log of the call, not for a fixed 1.5 s that
    a loaded runner may not reach the upstream in; the timeout was 4 s, which left a cancel sent
    1.5 s in 2.5 s of the runner's delays to land."""
    cancelled_at: list[float] = []

    async def work() -> None:
        async with host(profile, "legacy") as client:
            async with anyio.create_task_group() as group:

                async def slow() -> None:
                    await client.call_tool("up.slow", {"seconds": 30})

                group.start_soon(slow)
                log = tmp_path / "calls.jsonl"  # the upstream is working on it (a JSON reply: no progress to wait for)
                for _ in range(600):
                    if log.exists() and '"tool": "slow"' in log.read_text():
                        break
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()
            cancelled_at.append(time.monotonic())
            for _ in range(600):  # the outcome is written as the call ends: up to 30 s on a loaded runner
                if outcome_of("slow", tmp_path) is not None:
                    break
                await anyio.sleep(0.05)
            assert (await client.call_tool("up.add", {"a": 1, "b": 1})).structured_content == {"result": 2}

    run(work)
    outcome = outcome_of("slow", tmp_path)
    assert outcome is not None and outcome["outcome"] == "cancelled", outcome
    assert outcome["durationMs"] < 20000, outcome  # before the upstream timeout

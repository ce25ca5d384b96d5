"""What one principal's hosts see of another's: nothing. Two principals (two bearer tokens) call
through the real gateway over HTTP at the same moment, with real `mcp` SDK client hosts; the
upstream (tests/peers/tenant_probe.py, built with the SDK) waits until both calls are inside,
then logs, reports progress, elicits, samples and lists roots during each call. Each host must
see only its own call's traffic, and each call must get its own host's answers, whichever era
the host and the upstream speak, over stdio and over HTTP."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.gateway.test_http import Gateway, sdk_host, start, stop
from tests.gateway.test_stdio import ERAS, run
from tests.helpers import PEERS, free_port

PROBE = PEERS / "tenant_probe.py"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
READ_ONLY = """
[policy.hints."probe.*"]
readOnly = true
"""
PRINCIPALS = """
[serve.principals.alice]
token_env = "GW_ALICE"

[serve.principals.bob]
token_env = "GW_BOB"
"""
# (how the gateway reaches the upstream, whether the upstream speaks only the initialize era)
UPSTREAMS = [("stdio", False), ("stdio", True), ("http", False), ("http", True)]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(120):  # up to half a minute on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.25)
    proc.kill()
    pytest.fail("the probe server did not come up")


@dataclass
class Probed:
    gateway: Gateway
    over: str  # how the gateway reaches the probe: stdio | http
    legacy: bool  # the probe speaks only the initialize era


@pytest.fixture
def probe_gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Probed]:
    """The gateway in front of the probe (stdio or HTTP, either era)."""
    over, legacy = request.param
    flags = ["--legacy"] if legacy else []
    upstream = None
    if over == "stdio":
        server = f'[servers.probe]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps([str(PROBE), *flags])}\nsandbox = "none"\n'
    else:
        port = free_port()
        upstream = subprocess.Popen(
            [sys.executable, str(PROBE), "streamable-http", "--port", str(port), *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(port, upstream)
        server = f'[servers.probe]\nurl = "http://127.0.0.1:{port}/mcp"\n'
    profile = tmp_path / "tenants.toml"
    profile.write_text(server + READ_ONLY + PRINCIPALS)
    gateway = start(profile, "-v", env={"GW_ALICE": TOKENS["alice"], "GW_BOB": TOKENS["bob"]})
    try:
        yield Probed(gateway, over, legacy)
    finally:
        stop(gateway)
        if upstream is not None:
            upstream.terminate()
            upstream.wait(timeout=30)


@dataclass
class Host:
    """One host of one principal, and everything the gateway sent it."""

    principal: str
    mode: str
    seen: list[str] = field(default_factory=list)  # logs, progress, questions: each names its call's tag
    asked: list[str] = field(default_factory=list)  # which server->client requests reached it

    def options(self) -> dict[str, Any]:
        from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

        async def on_log(params: Any) -> None:
            self.seen.append(str(params.data))

        async def elicit(context: Any, params: Any) -> Any:
            self.asked.append("elicitation")
            self.seen.append(params.message)
            return ElicitResult(action="accept", content={"response": f"{self.principal}'s answer"})

        async def sample(context: Any, params: Any) -> Any:
            self.asked.append("sampling")
            self.seen.append(params.messages[0].content.text)
            return CreateMessageResult(
                role="assistant", model="m", content=TextContent(type="text", text=f"{self.principal}'s model")
            )

        async def roots(context: Any) -> Any:
            self.asked.append("roots")
            return ListRootsResult(roots=[Root(uri=f"file:///{self.principal}", name=self.principal)])

        return {
            "logging_callback": on_log,
            "log_level": "info",
            "elicitation_callback": elicit,
            "sampling_callback": sample,
            "list_roots_callback": roots,
        }

    async def call(self, gateway: Gateway, tool: str, tag: str, place: Path, count: int) -> Any:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            self.seen.append(str(message))

        from mcp.shared.exceptions import MCPError

        async with sdk_host(gateway.url, self.mode, TOKENS[self.principal], **self.options()) as client:
            try:
                return await client.call_tool(
                    f"probe.{tool}", {"tag": tag, "place": str(place), "count": count}, progress_callback=on_progress
                )
            except MCPError as exc:  # the upstream's own error, relayed
                return exc


def _together(gateway: Gateway, hosts: list[tuple[Host, str]], tool: str, place: Path) -> list[Any]:
    """Each host calls `tool` with its tag, all at once; their results in order."""
    results: list[Any] = [None] * len(hosts)

    async def work() -> None:
        async with anyio.create_task_group() as group:
            for i, (host, tag) in enumerate(hosts):

                async def one(i: int = i, host: Host = host, tag: str = tag) -> None:
                    results[i] = await host.call(gateway, tool, tag, place, len(hosts))

                group.start_soon(one)

    run(work)
    return results


@pytest.mark.parametrize("probe_gateway", UPSTREAMS, indirect=True, ids=lambda p: f"{p[0]}-{'legacy' if p[1] else 'modern'}")
@pytest.mark.parametrize("mode, version", ERAS)
def test_each_principal_gets_only_its_own_calls_traffic_and_answers(
    probe_gateway: Probed, tmp_path: Path, mode: str, version: str
) -> None:
    gateway, legacy_upstream = probe_gateway.gateway, probe_gateway.legacy
    alice, bob = Host("alice", mode), Host("bob", mode)
    place = tmp_path / "meet"
    place.mkdir()
    results = _together(gateway, [(alice, "alice"), (bob, "bob")], "probe", place)
    # an initialize-era upstream's requests cannot reach a 2026-07-28 host (it is asked only in
    # input_required results): declined, so the call fails; the other eras answer every request
    asks_reach_host = not (legacy_upstream and mode == "auto")
    for host, result in zip((alice, bob), results, strict=True):
        other = "bob" if host.principal == "alice" else "alice"
        assert not any(other in text for text in host.seen), (host.principal, host.seen)
        assert f"log for {host.principal}" in host.seen and f"progress for {host.principal}" in host.seen, host.seen
        if asks_reach_host:
            assert result.is_error is False, result
            assert json.loads(result.content[0].text) == {
                "tag": host.principal,
                "elicited": f"{host.principal}'s answer",
                "sampled": f"{host.principal}'s model",
                "roots": [f"file:///{host.principal}"],
            }
            assert f"question for {host.principal}" in host.seen and f"sample for {host.principal}" in host.seen
            assert {"elicitation", "sampling", "roots"} <= set(host.asked)
        else:
            assert host.asked == [] and "declined" in str(result), (host.asked, result)


@pytest.mark.parametrize("probe_gateway", UPSTREAMS, indirect=True, ids=lambda p: f"{p[0]}-{'legacy' if p[1] else 'modern'}")
def test_one_principals_sessions_sharing_an_upstream_see_only_their_own(probe_gateway: Probed, tmp_path: Path) -> None:
    """Two initialize-era sessions of one principal share its upstream connection. Over HTTP a
    message comes on its call's own stream: each session gets its own. Over stdio only progress
    names its call; a log sent while both sessions' calls are in flight may be either's, so it
    reaches neither (said at -v). Calls in flight that are all one session's do get theirs."""
    gateway = probe_gateway.gateway
    first, second = Host("alice", "legacy"), Host("alice", "legacy")
    place = tmp_path / "meet"
    place.mkdir()
    results = _together(gateway, [(first, "first"), (second, "second")], "chatter", place)
    for host, tag, other, result in ((first, "first", "second", results[0]), (second, "second", "first", results[1])):
        assert result.is_error is False, result
        assert not any(other in text for text in host.seen), host.seen
        assert f"progress for {tag}" in host.seen, host.seen
        if probe_gateway.over == "http":
            assert f"log for {tag}" in host.seen, host.seen
        else:
            assert not any(text.startswith("log for") for text in host.seen), host.seen
    _one_session_calls_in_parallel(gateway, tmp_path / "alone")


def _one_session_calls_in_parallel(gateway: Gateway, place: Path) -> None:
    """One session, two calls at once: every message reaches it, whatever the upstream says of
    which call it belongs to (on the stream of the oldest call when nothing says)."""
    host = Host("alice", "legacy")
    place.mkdir()

    async def work() -> None:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            host.seen.append(str(message))

        async with sdk_host(gateway.url, "legacy", TOKENS["alice"], **host.options()) as client:

            async def call(tag: str) -> None:
                arguments = {"tag": tag, "place": str(place), "count": 2}
                assert (await client.call_tool("probe.chatter", arguments, progress_callback=on_progress)).is_error is False

            async with anyio.create_task_group() as group:
                group.start_soon(call, "one")
                group.start_soon(call, "two")

    run(work)
    assert {"log for one", "log for two", "progress for one", "progress for two"} <= set(host.seen), host.seen


@pytest.mark.parametrize("probe_gateway", [("http", True)], indirect=True, ids=["http-legacy"])
def test_progress_naming_another_call_on_a_calls_own_stream_reaches_nobody(probe_gateway: Probed, tmp_path: Path) -> None:
    """A hostile upstream shared by two sessions (one principal's, one upstream session) sends, on
    each call's own stream, progress that names the other call's token: a message on a request's
    stream can only be about that request, so neither host hears it. The tokens it learnt are
    random, not a count of the gateway's calls."""
    first, second = Host("alice", "legacy"), Host("alice", "legacy")
    place = tmp_path / "meet"
    place.mkdir()
    results = _together(probe_gateway.gateway, [(first, "first"), (second, "second")], "spoof", place)
    for host, tag, result in ((first, "first", results[0]), (second, "second", results[1])):
        assert result.is_error is False, result
        assert f"progress for {tag}" in host.seen and not any("spoofed" in text for text in host.seen), host.seen
    tokens = [json.loads((place / f"token-{tag}").read_text()) for tag in ("first", "second")]
    assert all(isinstance(t, str) and not re.fullmatch(r"llmc-gateway-\d+", t) for t in tokens), tokens


def test_a_request_state_sealed_for_one_principal_is_not_honoured_for_another(tmp_path: Path) -> None:
    """A 2026-07-28 confirmation round's requestState carries the answers so far: replayed by
    another principal's host, it counts for nothing (that host gets a round of its own)."""
    profile = tmp_path / "confirm.toml"
    server = f'[servers.probe]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps([str(PROBE)])}\nsandbox = "none"\n'
    profile.write_text(server + PRINCIPALS)  # no readOnly hint: every call needs a person's yes
    gateway = start(profile, env={"GW_ALICE": TOKENS["alice"], "GW_BOB": TOKENS["bob"]})
    place = tmp_path / "meet"
    place.mkdir()

    def call(principal: str, extra: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": principal, "version": "1"},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "probe.chatter",
                "arguments": {"tag": "t", "place": str(place), "count": 1},
                "_meta": meta,
                **extra,
            },
        }
        headers = {
            "Authorization": f"Bearer {TOKENS[principal]}",
            "Accept": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "probe.chatter",
        }
        status, _, data = gateway.request("POST", "/mcp", body, headers)
        assert status == 200, data
        result: dict[str, Any] = json.loads(data)["result"]
        return result

    try:
        asked = call("alice", {})
        assert asked["resultType"] == "input_required" and "confirm" in asked["inputRequests"]
        yes = {"requestState": asked["requestState"], "inputResponses": {"confirm": {"action": "accept"}}}
        replayed = call("bob", yes)
        assert replayed.get("resultType") == "input_required", replayed  # asked afresh, nothing ran
        assert call("alice", yes).get("structuredContent") == {"result": "t"}  # its own host's yes
    finally:
        stop(gateway)

"""What the gateway passes through between a host (the `mcp` SDK client) and real upstreams
(the SDK test server, npm server-everything): progress, logs, cancellation, images, upstream
elicitation; and what it holds back: drifted tools, upstream protocol fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_stdio import ERAS, host, run
from tests.helpers import llmc, node_tool

EVERYTHING = """
[servers.every]
command = {everything}

[policy.hints."every.*"]
readOnly = true
"""


@pytest.fixture
def everything_profile(gateway_profile: Path) -> Path:
    with gateway_profile.open("a") as fh:
        fh.write(EVERYTHING.format(everything=json.dumps(node_tool("mcp-server-everything"))))
    return gateway_profile


@pytest.mark.parametrize("mode, version", ERAS)
def test_progress_and_logs_reach_the_host(gateway_profile: Path, mode: str, version: str) -> None:
    progress: list[tuple[float, float | None]] = []
    logs: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    async def work() -> None:
        async with host(gateway_profile, mode, logging_callback=on_log, log_level="info") as client:
            slept = await client.call_tool("sdk.slow", {"seconds": 0.3}, progress_callback=on_progress)
            assert slept.is_error is False
            logged = await client.call_tool("sdk.log", {"message": "hello from upstream"})
            assert logged.is_error is False

    run(work)
    assert progress and progress[-1] == (3, 3)
    assert "hello from upstream" in logs


@pytest.mark.parametrize("mode, version", ERAS)
def test_a_cancelled_call_is_cancelled_upstream_and_audited(
    gateway_profile: Path, tmp_path: Path, mode: str, version: str
) -> None:
    started = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    async def work() -> None:
        async with host(gateway_profile, mode) as client:
            async with anyio.create_task_group() as group:

                async def slow() -> None:
                    await client.call_tool("sdk.slow", {"seconds": 30}, progress_callback=on_progress)

                group.start_soon(slow)
                await started.wait()  # the upstream is working on it
                group.cancel_scope.cancel()
            # the gateway still answers, and the cancelled call's outcome is on disk
            assert (await client.call_tool("sdk.add", {"a": 1, "b": 1})).structured_content == {"result": 2}
            for _ in range(100):
                if any(r.get("outcome") == "cancelled" for r in audit_records(tmp_path)):
                    break
                await anyio.sleep(0.1)

    run(work)
    outcome = next(r for r in audit_records(tmp_path) if r["event"] == "outcome" and r["tool"] == "slow")
    assert outcome["outcome"] == "cancelled"


@pytest.mark.e2e  # the npm server-everything
@pytest.mark.parametrize("mode, version", ERAS)
def test_images_and_structured_content_pass_through(everything_profile: Path, mode: str, version: str) -> None:
    async def work() -> None:
        async with host(everything_profile, mode) as client:
            image = await client.call_tool("every.get-tiny-image", {})
            kinds = [c.type for c in image.content]
            assert "image" in kinds
            data = next(c for c in image.content if c.type == "image")
            assert data.mime_type == "image/png" and len(data.data) > 100
            structured = await client.call_tool("every.get-structured-content", {"location": "Chicago"})
            assert structured.structured_content and "temperature" in structured.structured_content

    run(work)


@pytest.mark.parametrize("mode, version, reaches_host", [("legacy", "2025-11-25", True), ("auto", "2026-07-28", False)])
@pytest.mark.e2e  # the npm server-everything
def test_an_upstreams_elicitation_goes_to_a_host_that_can_answer(
    everything_profile: Path, mode: str, version: str, reaches_host: bool
) -> None:
    from mcp_types import ElicitResult

    asked: list[str] = []

    async def answer(context: Any, params: Any) -> Any:
        asked.append(params.message)
        properties = (params.requested_schema or {}).get("properties", {})
        content = {
            k: v.get("default", "x") if v.get("type") == "string" else v.get("default", 1)
            for k, v in properties.items()
            if k in (params.requested_schema or {}).get("required", [])
        }
        return ElicitResult(action="accept", content=content)

    async def work() -> None:
        async with host(everything_profile, mode, elicitation_callback=answer) as client:
            result = await client.call_tool("every.trigger-elicitation-request", {})
            text = " ".join(c.text for c in result.content if c.type == "text")
            assert ("accept" in text.lower()) is reaches_host, text

    run(work)
    assert bool(asked) is reaches_host


def test_drifted_tools_are_absent_and_refused(gateway_profile: Path) -> None:
    lock = gateway_profile.parent / "gw.lock"
    locked = llmc("-p", str(gateway_profile), "tools", "lock", "-o", str(lock))
    assert locked.returncode == 0, locked.stderr
    pinned = json.loads(lock.read_text())
    pinned["servers"]["sdk"]["tools"]["add"]["hash"] = "sha256:" + "0" * 64  # as if sdk.add had changed
    lock.write_text(json.dumps(pinned))
    gateway_profile.write_text(f'lock = "{lock.name}"\n' + gateway_profile.read_text())

    async def work() -> None:
        from mcp.shared.exceptions import MCPError

        async with host(gateway_profile, "auto") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "sdk.add" not in names and "sdk.weather" in names
            with pytest.raises(MCPError, match="changed since it was locked"):
                await client.call_tool("sdk.add", {"a": 1, "b": 2})
            assert (await client.call_tool("sdk.weather", {"city": "Rome"})).is_error is False

    run(work)


def test_upstream_protocol_fields_stay_upstream(gateway_profile: Path) -> None:
    """The upstream's serverInfo and result type do not leak into the host's results."""

    async def work() -> None:
        async with host(gateway_profile, "legacy") as client:
            result = await client.call_tool("sdk.add", {"a": 1, "b": 2})
            assert not (result.meta or {}), result.meta
            read = await client.read_resource("sdk.test://greeting")
            assert not (read.meta or {})

    run(work)


def test_a_crashed_upstream_is_started_again(gateway_profile: Path, tmp_path: Path) -> None:
    """The gateway outlives its upstreams: the call that crashed sdk fails as a tool error, a
    later call starts sdk again (after the retry pause) and works."""
    gateway_profile.write_text(
        gateway_profile.read_text().replace('deny = ["sdk.crash", ', "deny = [")
        + '\n[policy.hints."sdk.crash"]\nreadOnly = true\n'
    )

    async def work() -> None:
        async with host(gateway_profile, "legacy") as client:
            crashed = await client.call_tool("sdk.crash", {})
            assert crashed.is_error is True and "sdk.crash failed" in crashed.content[0].text
            for _ in range(100):  # RETRY_SECONDS pass, then sdk starts again
                result = await client.call_tool("sdk.add", {"a": 2, "b": 2})
                if not result.is_error:
                    break
                await anyio.sleep(0.2)
            assert result.structured_content == {"result": 4}

    run(work)
    outcomes = [r["outcome"] for r in audit_records(tmp_path) if r["event"] == "outcome" and r["tool"] == "crash"]
    assert outcomes == ["transport_error"]


TARGET = """
[servers.target]
command = {python}
args = [{target}]

[policy.hints."target.*"]
readOnly = true
"""


@pytest.mark.parametrize(
    "mode, declares_roots, expected",
    [
        ("legacy", True, ["file:///work/project"]),  # initialize era: the host is asked
        ("legacy", False, []),  # a host without roots is not asked
        ("auto", True, ["file:///work/project"]),  # 2026-07-28: an input_required round of its own
        ("auto", False, []),
    ],
)
def test_an_upstreams_roots_request_goes_to_a_host_that_has_roots(
    gateway_profile: Path, mode: str, declares_roots: bool, expected: list[str]
) -> None:
    import sys

    from mcp_types import ListRootsResult, Root

    from tests.helpers import PEERS

    with gateway_profile.open("a") as fh:
        fh.write(TARGET.format(python=json.dumps(sys.executable), target=json.dumps(str(PEERS / "conformance_target.py"))))

    async def roots(context: Any) -> Any:
        return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])

    async def work() -> None:
        options = {"list_roots_callback": roots} if declares_roots else {}
        async with host(gateway_profile, mode, **options) as client:
            result = await client.call_tool("target.test_list_roots", {})
            assert result.is_error is False, result
            assert json.loads(result.content[0].text) == expected

    run(work)


@pytest.mark.parametrize("over", ["stdio", "http"])
@pytest.mark.parametrize("mode, version", ERAS)
def test_resource_subscriptions_reach_an_initialize_era_upstream(
    gateway_profile: Path, mode: str, version: str, over: str
) -> None:
    """resources/subscribe (initialize-era hosts) and subscriptions/listen (2026-07-28 hosts, on an
    open SSE stream over HTTP) go to an initialize-era upstream as resources/subscribe (the target
    over HTTP: over stdio the SDK answers in the era of its first message), and its
    notifications/resources/updated reach the subscribed host under the gateway's name."""
    import socket
    import subprocess
    import sys
    import time

    from mcp.shared.exceptions import MCPError

    from tests.helpers import PEERS, free_port

    port = free_port()
    target = subprocess.Popen(
        [sys.executable, str(PEERS / "conformance_target.py"), "streamable-http", "--port", str(port), "--legacy"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(120):  # up to half a minute on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.25)
    with gateway_profile.open("a") as fh:
        fh.write(f'\n[servers.target]\nurl = "http://127.0.0.1:{port}/mcp"\n\n[policy.hints."target.*"]\nreadOnly = true\n')
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updated.append(str(root.params.uri))

    from tests.gateway.test_http import sdk_host, start, stop

    gateway = start(gateway_profile) if over == "http" else None

    async def work() -> None:
        connected = (
            sdk_host(gateway.url, mode, message_handler=on_message)
            if gateway
            else host(gateway_profile, mode, message_handler=on_message)
        )
        async with connected as client:
            uri = "target.test://watched-resource"
            if version == "2026-07-28":  # subscriptions/listen: the ack says what is honoured, then events
                from mcp.shared.subscriptions import ResourceUpdated

                with pytest.raises(MCPError, match="method not found"):
                    await client.subscribe_resource(uri)
                async with client.listen(resource_subscriptions=[uri, "nosuch.test://x"]) as sub:
                    assert sub.honored is not None and sub.honored.resource_subscriptions == [uri]
                    assert (await client.call_tool("target.test_touch_watched", {})).is_error is False
                    with anyio.fail_after(30):
                        event = await sub.__anext__()
                    assert event == ResourceUpdated(uri=uri)
                return
            assert client.session.server_capabilities.resources.subscribe is True
            await client.subscribe_resource(uri)
            assert (await client.call_tool("target.test_touch_watched", {})).is_error is False
            with anyio.fail_after(30):
                while not updated:
                    await anyio.sleep(0.05)
            assert updated == [uri]
            await client.unsubscribe_resource(uri)

    try:
        run(work)
    finally:
        if gateway is not None:
            stop(gateway)
        target.terminate()
        target.wait(timeout=30)


# tool of the target, its arguments, what the host's answer makes of it; adding a request = one line
ASKS = {
    "elicitation": (
        "target.test_elicitation",
        {"message": "Your name?"},
        'User response: action=accept, content={"response":"Ada"}',
    ),
    "sampling": ("target.test_sampling", {"prompt": "Say hi"}, "LLM response: hi from the host's model"),
    "roots": ("target.test_list_roots", {}, '["file:///work/project"]'),
}


@pytest.mark.parametrize("ask", sorted(ASKS))
@pytest.mark.parametrize("mode, version", ERAS)
@pytest.mark.parametrize("confirm", [False, True])
def test_an_upstreams_requests_reach_the_host_in_both_eras(
    gateway_profile: Path, tmp_path: Path, mode: str, version: str, ask: str, confirm: bool
) -> None:
    """The target speaks 2026-07-28 to the gateway, so it asks in input_required results; the
    gateway asks an initialize-era host with a request, a 2026-07-28 host with its own
    input_required round (after the confirmation round when the tool needs a yes)."""
    import sys

    from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

    from tests.helpers import PEERS

    profile = TARGET.format(python=json.dumps(sys.executable), target=json.dumps(str(PEERS / "conformance_target.py")))
    if confirm:  # no readOnly hint: the gateway's own confirmation comes first
        profile = profile.split("[policy.hints")[0]
    with gateway_profile.open("a") as fh:
        fh.write(profile)
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={} if params.message.startswith("Run ") else {"response": "Ada"})

    async def sample(context: Any, params: Any) -> Any:
        asked.append("sampling")
        return CreateMessageResult(
            role="assistant", model="host-model", content=TextContent(type="text", text="hi from the host's model")
        )

    async def roots(context: Any) -> Any:
        asked.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])

    tool, arguments, expected = ASKS[ask]

    async def work() -> None:
        async with host(
            gateway_profile, mode, elicitation_callback=elicit, sampling_callback=sample, list_roots_callback=roots
        ) as client:
            result = await client.call_tool(tool, arguments)
            assert result.is_error is False, result
            assert result.content[0].text == expected

    run(work)
    assert (asked[0].startswith("Run ") and len(asked) == 2) if confirm else len(asked) == 1, asked
    outcomes = [r["outcome"] for r in audit_records(tmp_path) if r["event"] == "outcome"]
    assert outcomes[-1] == "ok" and set(outcomes[:-1]) <= {"input_required"}, outcomes

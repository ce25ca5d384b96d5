"""One-shot hosts (the Inspector CLI, mcporter, CI scripts: initialize, one call, never DELETE) do
not pile up upstream processes: a principal's host sessions share one process of a stdio server,
unless the server is marked `per_session`; a principal holds at most `[serve] max_upstreams`
(its least recently used idle session's go first); and a process no live host session uses is
stopped after `[serve] upstream_idle_timeout`. The processes are counted in /proc, by a marker
in their environment."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.test_http import Gateway, start, stop
from tests.gateway.test_stateful_upstreams import TOKENS, HttpHost, _text, modern_call
from tests.helpers import PEERS

PROFILE = """\
[servers.sdk]
command = {python}
args = [{server}]
env = {{ LLMC_TEST_MARK = "{mark}-sdk" }}
sandbox = "none"  # routing is tested here, confinement in tests/sandbox; a gateway with principals needs it said

[servers.own]
command = {python}
args = [{server}]
env = {{ LLMC_TEST_MARK = "{mark}-own" }}
sandbox = "none"  # routing is tested here, confinement in tests/sandbox; a gateway with principals needs it said
per_session = true

[policy.hints."sdk.*"]
readOnly = true

[policy.hints."own.*"]
readOnly = true

[serve]
max_upstreams = {cap}
upstream_idle_timeout = {idle}

[serve.principals.alice]
token_env = "GW_ALICE"

[serve.principals.bob]
token_env = "GW_BOB"
"""


def processes(mark: str) -> int:
    """How many live processes carry LLMC_TEST_MARK=mark in their environment."""
    needle = f"LLMC_TEST_MARK={mark}\0".encode()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes() and "Z" not in (entry / "stat").read_text().split(")")[-1][:3]:
                count += 1
        except OSError:
            continue  # ended meanwhile, or not ours to read
    return count


def settled(mark: str, expected: int, seconds: float = 20.0) -> int:
    """The count once it is `expected` (processes start and stop asynchronously), or the last one."""
    count = processes(mark)
    deadline = time.monotonic() + seconds
    while count != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        count = processes(mark)
    return count


@pytest.fixture
def sharing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Gateway, str]]:
    cap, idle = getattr(request, "param", (16, 60))
    mark = uuid.uuid4().hex
    profile = tmp_path / "sharing.toml"
    profile.write_text(
        PROFILE.format(
            python=json.dumps(sys.executable), server=json.dumps(str(PEERS / "sdk_server.py")), mark=mark, cap=cap, idle=idle
        )
    )
    gateway = start(profile, env={"GW_ALICE": TOKENS["alice"], "GW_BOB": TOKENS["bob"]})
    try:
        yield gateway, mark
    finally:
        stop(gateway)


def test_one_shot_sessions_share_one_process_per_principal(sharing: tuple[Gateway, str]) -> None:
    gateway, mark = sharing
    # the gateway's own connection (tool lists) runs one of each from the start
    assert settled(f"{mark}-sdk", 1) == 1 and settled(f"{mark}-own", 1) == 1
    for i in range(12):  # one-shot hosts: a session, one call, no DELETE
        assert _text(HttpHost(gateway, "alice").call("sdk.remember", key=f"k{i}", value="v"))[0] is False
    assert settled(f"{mark}-sdk", 2) == 2  # one more, whatever the number of sessions
    # a per_session server: one for each host session
    for _ in range(3):
        assert _text(HttpHost(gateway, "alice").call("own.remember", key="k", value="v"))[0] is False
    assert settled(f"{mark}-own", 4) == 4
    # another principal never shares alice's: one of its own
    missed, text = _text(HttpHost(gateway, "bob").call("sdk.recall", key="k0"))
    assert missed and "nothing remembered" in text
    assert settled(f"{mark}-sdk", 3) == 3


@pytest.mark.parametrize("sharing", [(2, 1)], indirect=True)
def test_a_principal_is_capped_and_idle_upstreams_are_reaped(sharing: tuple[Gateway, str]) -> None:
    gateway, mark = sharing
    assert settled(f"{mark}-own", 1) == 1
    sessions = [HttpHost(gateway, "alice") for _ in range(3)]
    for i, session in enumerate(sessions):
        assert _text(session.call("own.remember", key="k", value=f"v{i}"))[0] is False
        assert processes(f"{mark}-own") <= 3  # the gateway's own and at most two of alice's
    # the third took the place of the first (the least recently used): the first lost its note
    assert settled(f"{mark}-own", 3) == 3
    assert _text(sessions[2].call("own.recall", key="k")) == (False, "v2")
    missed, text = _text(sessions[0].call("own.recall", key="k"))
    assert missed and "nothing remembered" in text
    for session in sessions:
        session.end()
    assert settled(f"{mark}-own", 1) == 1  # a per_session server's process ends with its session
    # bob is not held back by alice's cap
    assert _text(HttpHost(gateway, "bob").call("sdk.remember", key="b", value="v"))[0] is False
    # a principal's shared process no live session uses is stopped after upstream_idle_timeout
    a = HttpHost(gateway, "alice")
    assert _text(a.call("sdk.remember", key="a", value="v"))[0] is False
    assert settled(f"{mark}-sdk", 3) == 3  # the gateway's, bob's, alice's
    a.end()
    assert settled(f"{mark}-sdk", 2) == 2  # bob's session lives on: his stays


def test_per_session_and_the_caps_are_checked_profile_keys(tmp_path: Path) -> None:
    from tests.helpers import llmc

    profile = tmp_path / "keys.toml"
    profile.write_text(
        PROFILE.format(
            python=json.dumps(sys.executable), server=json.dumps(str(PEERS / "sdk_server.py")), mark="m", cap=4, idle=30
        )
    )
    shown = llmc("-p", str(profile), "servers", "show", "own")
    assert shown.returncode == 0 and shown.json()["per_session"] is True
    for wrong, key in (
        ('per_session = "sometimes"', "servers.own.per_session"),
        ("max_upstreams = 0", "serve.max_upstreams"),
        ("upstream_idle_timeout = -1", "serve.upstream_idle_timeout"),
    ):
        text = profile.read_text()
        field = wrong.split(" = ")[0]
        bad = tmp_path / "bad.toml"
        bad.write_text("\n".join(wrong if line.startswith(field + " =") else line for line in text.splitlines()))
        refused = llmc("-p", str(bad), "servers", "list")
        assert refused.returncode == 3 and key in refused.stderr and "Traceback" not in refused.stderr, refused.stderr


def test_without_principals_hosts_use_the_upstreams_warmed_at_start(tmp_path: Path) -> None:
    """A gateway that asks for no principal has one user: its hosts call through the
    connections the gateway started (warmed) for its tool lists, so the first call pays no
    second cold start and the server does not run twice; per_session servers still get one
    process per host session."""
    mark = uuid.uuid4().hex
    profile = tmp_path / "anonymous.toml"
    text = PROFILE.format(
        python=json.dumps(sys.executable), server=json.dumps(str(PEERS / "sdk_server.py")), mark=mark, cap=16, idle=60
    )
    profile.write_text(text.split("[serve.principals.alice]")[0])
    gateway = start(profile)
    try:
        assert settled(f"{mark}-sdk", 1) == 1 and settled(f"{mark}-own", 1) == 1  # warmed at start
        first = HttpHost(gateway, "alice")  # a token nobody asked for: no principal
        assert _text(first.call("sdk.remember", key="k", value="v1"))[0] is False
        assert processes(f"{mark}-sdk") == 1  # the call ran on the warmed process, none was started
        # the same process: what one host session left, the next one (and a 2026-07-28 request) sees
        assert _text(HttpHost(gateway, "bob").call("sdk.recall", key="k")) == (False, "v1")
        assert _text(modern_call(gateway, "bob", "sdk.recall", key="k")) == (False, "v1")
        assert processes(f"{mark}-sdk") == 1
        assert _text(first.call("own.remember", key="k", value="v"))[0] is False
        assert settled(f"{mark}-own", 2) == 2  # per_session: the session's own
        first.end()
        assert settled(f"{mark}-own", 1) == 1 and processes(f"{mark}-sdk") == 1  # the shared one stays
    finally:
        stop(gateway)


def test_without_principals_the_shared_upstreams_count_in_max_upstreams(tmp_path: Path) -> None:
    """The connections every host of a gateway without principals shares are that host's: they
    count in its `[serve] max_upstreams` like a principal's own, the ones warmed at start
    included. Past it, a server's connection is refused with an error naming the limit (not
    started), and what is running keeps serving."""
    mark = uuid.uuid4().hex
    profile = tmp_path / "capped.toml"
    server = f'command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / "sdk_server.py"))}]\nsandbox = "none"\n'
    profile.write_text(
        f'[servers.one]\n{server}env = {{ LLMC_TEST_MARK = "{mark}" }}\n\n'
        f'[servers.two]\n{server}env = {{ LLMC_TEST_MARK = "{mark}" }}\n\n'
        '[policy.hints."one.*"]\nreadOnly = true\n\n[policy.hints."two.*"]\nreadOnly = true\n\n'
        "[serve]\nmax_upstreams = 1\n"
    )
    gateway = start(profile)
    try:
        assert settled(mark, 1) == 1
        host = HttpHost(gateway, "alice")  # a token nobody asked for: no principal
        outcomes = {name: _text(host.call(f"{name}.remember", key="k", value="v")) for name in ("one", "two")}
        ran = [name for name, (failed, _) in outcomes.items() if not failed]
        refused = [text for failed, text in outcomes.values() if failed]
        assert len(ran) == 1 and len(refused) == 1, outcomes
        assert "max_upstreams" in refused[0] and "1 upstream connections" in refused[0], refused[0]
        assert _text(HttpHost(gateway, "bob").call(f"{ran[0]}.recall", key="k")) == (False, "v")  # still shared
        time.sleep(0.5)
        assert processes(mark) == 1  # the refused one never started
    finally:
        stop(gateway)

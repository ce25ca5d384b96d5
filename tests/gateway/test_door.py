"""The gateway's door in process (gateway/access.py), no socket: a request that arrived after a
token was revoked is refused, also when it takes the principals another request's stat of the
profile found (one stat serves the requests that arrived before it began)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.access import Door
from llmc_cli.gateway.admission import Refused
from tests.helpers import llmc


def token(profile: Path, name: str) -> str:
    created = llmc("serve", "-p", str(profile), "token", "create", name)
    assert created.returncode == 0, created.stderr
    return str(json.loads(created.stdout)["token"])


def name_of(door: Door, secret: str, arrived: float) -> str | int:
    """The principal a request with this token (that arrived then) is, or its refusal's status."""
    try:
        principal = door.principal_of(f"Bearer {secret}", None, arrived)
    except Refused as refused:
        return refused.status
    assert principal is not None
    return principal.name


def test_a_request_after_a_revoke_is_refused_whoever_stats_the_profile(gateway_profile: Path) -> None:
    ops, bot = token(gateway_profile, "ops"), token(gateway_profile, "bot")
    door = Door(load_profile(str(gateway_profile)), "127.0.0.1")
    assert name_of(door, bot, time.monotonic()) == "bot"
    revoked = llmc("serve", "-p", str(gateway_profile), "token", "revoke", "bot")
    assert revoked.returncode == 0, revoked.stderr
    after = time.monotonic()  # arrived after the revoke: refused, by its own stat...
    assert name_of(door, bot, after) == 401
    second = time.monotonic()  # ...or by a stat another request began after it arrived
    assert name_of(door, ops, time.monotonic()) == "ops"
    assert name_of(door, bot, second) == 401
    rotated = token(gateway_profile, "ops")  # rotation: the old token goes with the next request
    later = time.monotonic()
    assert name_of(door, rotated, time.monotonic()) == "ops"
    assert (name_of(door, ops, later), name_of(door, rotated, later)) == (401, "ops")


def test_a_lone_hosts_requests_see_every_edit(gateway_profile: Path) -> None:
    """Each request that arrived after the latest stat stats again (no time window)."""
    names = ["a", "b", "c"]
    secrets = {name: token(gateway_profile, name) for name in names}
    door = Door(load_profile(str(gateway_profile)), "127.0.0.1")
    for name in names:
        assert name_of(door, secrets[name], time.monotonic()) == name
        assert llmc("serve", "-p", str(gateway_profile), "token", "revoke", name).returncode == 0
        assert name_of(door, secrets[name], time.monotonic()) == 401


def test_who_needs_a_token_by_the_listening_address(tmp_path: Path) -> None:
    """Without principals a loopback gateway lets requests in (auth none); the same profile on
    another address is refused at start (it would let everybody in); judged once per door."""
    from llmc_cli.errors import UsageError
    from llmc_cli.gateway.access import is_loopback_host

    profile = tmp_path / "open.toml"
    profile.write_text('[servers.sdk]\ncommand = "true"\n')
    loaded = load_profile(str(profile))
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        door = Door(loaded, host)
        assert not door.auth_required() and door.auth_mode() == "none"
        assert door.principal_of(None, None, time.monotonic()) is None
    for host in ("0.0.0.0", "192.0.2.7", "gw.example.com"):
        assert not is_loopback_host(host)
        with pytest.raises(UsageError, match="needs inbound authentication"):
            Door(loaded, host)
    assert [is_loopback_host(h) for h in ("127.0.0.1", "::1", "[::1]", "10.0.0.1", "")] == [True, True, False, False, False]


def test_off_loopback_every_request_shows_a_token(gateway_profile: Path) -> None:
    ops = token(gateway_profile, "ops")
    door = Door(load_profile(str(gateway_profile)), "0.0.0.0")
    assert door.auth_required() and door.auth_mode() == "bearer"
    for _ in range(2):  # the address judged once: the same answer every request
        assert name_of(door, ops, time.monotonic()) == "ops"
        assert name_of(door, "", time.monotonic()) == 401  # no token: "Bearer " with nothing
        with pytest.raises(Refused) as refused:
            door.principal_of(None, None, time.monotonic())
        assert refused.value.status == 401


def test_host_headers_judged_once_each_alike(tmp_path: Path) -> None:
    """host_allowed keeps its verdict per header value (every request asks): asked again, and
    asked past the bound of what it keeps, each header gets the verdict it got the first time."""
    profile = tmp_path / "p.toml"
    profile.write_text('[servers.a]\ncommand = "true"\n\n[serve]\nallowed_hosts = ["mcp.example.test"]\n')
    door = Door(load_profile(str(profile)), "127.0.0.1")
    expected = {
        "127.0.0.1:8080": True,
        "localhost": True,
        "[::1]:9": True,
        "mcp.example.test": True,
        "MCP.Example.Test:443": True,
        "evil.test": False,
        "evil.test:8080": False,
        "": False,
    }
    headers = [*expected, *(f"h{i}.test" for i in range(100))]
    for _ in range(2):
        for header in headers:
            assert door.host_allowed(header) is expected.get(header, False), header
            with pytest.raises(Refused) if not expected.get(header, False) else contextlib.nullcontext():
                door.check_origin(header, None)

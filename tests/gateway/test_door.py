"""The gateway's door in process (gateway/access.py), no socket: a request that arrived after a
token was revoked is refused, also when it takes the principals another request's stat of the
profile found (one stat serves the requests that arrived before it began)."""

from __future__ import annotations

import json
import time
from pathlib import Path

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

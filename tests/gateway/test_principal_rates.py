"""A principal's own calls per minute (`[serve.principals.NAME] calls_per_minute`): past it that
principal's calls are denied with a retry-after hint while the others go on; the profile's
`[policy] calls_per_minute` stays one limit every principal of the profile shares. Through the
gateway served in process, 2026-07-28 requests over HTTP, the SDK test server over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.gateway.test_http import start, stop
from tests.gateway.test_stateful_upstreams import TOKENS, _text, modern_call
from tests.helpers import PEERS, llmc

PROFILE = """\
[servers.sdk]
command = {python}
args = [{server}]
sandbox = "none"  # limits are tested here, confinement in tests/sandbox

[policy]
calls_per_minute = 5

[policy.hints."sdk.echo"]
readOnly = true

[serve.principals.alice]
token_env = "GW_ALICE"
calls_per_minute = 2

[serve.principals.bob]
token_env = "GW_BOB"
"""


def write(path: Path, text: str = PROFILE) -> Path:
    path.write_text(text.format(python=json.dumps(sys.executable), server=json.dumps(str(PEERS / "sdk_server.py"))))
    return path


@pytest.mark.usefixtures("isolated_dirs")
def test_a_principal_past_its_own_limit_is_held_back_and_the_others_go_on(tmp_path: Path) -> None:
    gateway = start(write(tmp_path / "rates.toml"), env={"GW_ALICE": TOKENS["alice"], "GW_BOB": TOKENS["bob"]})
    try:
        for i in range(2):
            assert _text(modern_call(gateway, "alice", "sdk.echo", message=f"a{i}")) == (False, f"a{i}")
        denied, text = _text(modern_call(gateway, "alice", "sdk.echo", message="a2"))
        assert denied and "rate limit: principal limit of 2 calls per minute reached" in text, text
        # bob has no limit of his own: the profile's 5 a minute, of which alice used 2 (her
        # denied call counted nowhere)
        for i in range(3):
            assert _text(modern_call(gateway, "bob", "sdk.echo", message=f"b{i}")) == (False, f"b{i}")
        denied, text = _text(modern_call(gateway, "bob", "sdk.echo", message="b3"))
        assert denied and "rate limit: profile limit of 5 calls per minute reached" in text, text
    finally:
        stop(gateway)


def test_calls_per_minute_of_a_principal_is_a_checked_profile_key(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.toml", PROFILE.replace("calls_per_minute = 2", "calls_per_minute = 0"))
    refused = llmc("-p", str(bad), "servers", "list")
    assert refused.returncode == 3 and "serve.principals.alice.calls_per_minute" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr

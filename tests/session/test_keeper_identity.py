"""A keeper serves a server only to a command that would reach it the same way (QA: a command
run with another ${TOKEN} was served the process started with the old one, another account's).

The identity is ServerSpec.reach: an HMAC under the approval key, so the token is in no file and
on no socket in clear."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import profile_file, sdk_server
from tests.session.test_keeper import Keepers, keepers, one_line  # noqa: F401 - the fixture

TOKEN_A = "tok-alice-7f3a9c1e5b"
TOKEN_B = "tok-bob-2d8e4f6a0c"


def _profile(keepers: Keepers) -> None:  # noqa: F811 - the fixture imported above
    server = sdk_server("env_reporter.py")
    config = Path(keepers.env["LLMC_CONFIG_DIR"])
    profile_file(
        config,
        f'[servers.id]\ncommand = "{server[0]}"\nargs = ["{server[1]}"]\nenv = {{ API_TOKEN = "${{TOKEN}}" }}\n'
        f'[servers.t]\ncommand = "{server[0]}"\nargs = ["{server[1]}"]\n',
    )


def _whoami(keepers: Keepers, token: str | None, server: str = "id") -> tuple[int, str, str]:  # noqa: F811
    env = {"TOKEN": token} if token is not None else {}
    proc = keepers.run("call", f"{server}.whoami", "--session", "acct", "--yes", env=env)
    text = json.loads(proc.stdout)["content"][0]["text"] if proc.returncode == 0 else ""
    return proc.returncode, text, proc.stderr


def test_a_command_with_another_token_is_not_served_the_sessions_server(keepers: Keepers) -> None:  # noqa: F811
    _profile(keepers)
    proc = keepers.run("session", "start", "acct", env={"TOKEN": TOKEN_A})
    assert proc.returncode == 0, proc.stderr
    keepers.pids.add(json.loads(proc.stdout)["pid"])

    assert _whoami(keepers, TOKEN_A)[:2] == (0, TOKEN_A)  # the same account: the session's server

    code, text, stderr = _whoami(keepers, TOKEN_B)
    assert code == 3 and text == "", "a command with another token was served another account's server"
    line = one_line(stderr)
    assert "session acct" in line and "'id'" in line and "llmc session stop acct" in line
    assert TOKEN_A not in stderr and TOKEN_B not in stderr

    # A server whose configuration did not change is still served to that command.
    assert _whoami(keepers, TOKEN_B, server="t")[:2] == (0, "unset")
    # A command that cannot configure the server (TOKEN unset) claims no identity: the
    # session's server, as before (a cron job without the shell's secrets).
    assert _whoami(keepers, None)[:2] == (0, TOKEN_A)
    # The session goes on serving its own account.
    assert _whoami(keepers, TOKEN_A)[:2] == (0, TOKEN_A)

    # No token in clear in the state directory (the socket's name, the log).
    for path in keepers.state.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN_A.encode() not in data and TOKEN_B.encode() not in data, path


def test_a_restarted_session_serves_the_new_token(keepers: Keepers) -> None:  # noqa: F811
    _profile(keepers)
    for token in (TOKEN_A, TOKEN_B):
        proc = keepers.run("session", "start", "acct", "-s", "id", env={"TOKEN": token})
        assert proc.returncode == 0, proc.stderr
        keepers.pids.add(json.loads(proc.stdout)["pid"])
        assert _whoami(keepers, token)[:2] == (0, token)
        assert keepers.run("session", "stop", "acct").returncode == 0


def test_the_identity_covers_headers_url_and_sandbox_not_timeouts() -> None:
    from llmc_cli.model import SandboxSpec, ServerSpec

    key = b"k" * 32
    base = ServerSpec(name="r", url="http://127.0.0.1:9/mcp", headers={"Authorization": f"Bearer {TOKEN_A}"})
    assert base.reach(key) != ServerSpec(name="r", url=base.url, headers={"Authorization": f"Bearer {TOKEN_B}"}).reach(key)
    assert base.reach(key) != ServerSpec(name="r", url="http://127.0.0.1:10/mcp", headers=base.headers).reach(key)
    assert base.reach(key) == ServerSpec(name="r", url=base.url, headers=base.headers, timeout=5.0).reach(key)
    stdio = ServerSpec(name="s", command=("srv",))
    assert stdio.reach(key) != ServerSpec(name="s", command=("srv",), sandbox=SandboxSpec(mode="bwrap")).reach(key)
    assert TOKEN_A not in base.reach(key) and base.reach(key) != base.reach(b"j" * 32)

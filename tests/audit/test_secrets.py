"""Secrets stay out of the audit trail: callHash is an HMAC under a per-install key (so a masked
argument cannot be recovered by hashing guesses), pre-approvals still match on one installation
and across machines that share LLMC_APPROVAL_KEY; every free-text field of a record is masked."""

from __future__ import annotations

import hashlib
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import audit_trail, llmc, profile_file, sdk_server

SECRET = "hunter2-very-secret"
SHARED_KEY = "0123456789abcdef" * 4


def write_profile(config: Path, policy: str = "") -> None:
    profile_file(
        config,
        f"""
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]
[policy]
{policy}
""",
    )


def records(state: Path) -> list[dict]:
    return audit_trail(state)


def test_the_call_hash_cannot_be_recomputed_from_a_guess(isolated_dirs):
    write_profile(isolated_dirs / "config")
    assert llmc("call", "sdk.echo", f"message={SECRET}", env={"MY_TOKEN": SECRET}).returncode == 0
    [decision, outcome] = records(isolated_dirs / "state")
    assert decision["arguments"] == {"message": "***"} and SECRET not in json.dumps([decision, outcome])
    guess = json.dumps(
        {"tool": "sdk.echo", "arguments": {"message": SECRET}}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert decision["callHash"].startswith("hmac-sha256:")
    assert hashlib.sha256(guess.encode()).hexdigest() not in decision["callHash"]
    key = isolated_dirs / "state" / "approval.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


KEY_MAKER = """
import sys
from llmc_cli.model import ToolCall
from llmc_cli.policy import call_hash
print(call_hash(ToolCall("s", "t", {"a": 1})))
"""


def test_the_key_is_created_once_when_processes_race(isolated_dirs):
    procs = [subprocess.Popen([sys.executable, "-c", KEY_MAKER], stdout=subprocess.PIPE, text=True) for _ in range(8)]
    hashes = {p.communicate(timeout=60)[0] for p in procs}
    assert len(hashes) == 1 and all(p.returncode == 0 for p in procs)
    assert [p.name for p in (isolated_dirs / "state").iterdir()] == ["approval.key"]


# where the second call runs -> does the approval written on the first installation match there
INSTALLATIONS = [
    ("same installation", False, False, 0),
    ("another machine", True, False, 4),
    ("another machine sharing LLMC_APPROVAL_KEY", True, True, 0),
]


@pytest.mark.parametrize("name, elsewhere, shared, code", INSTALLATIONS)
def test_a_pre_approval(isolated_dirs, name, elsewhere, shared, code):
    write_profile(isolated_dirs / "config", 'confirm = ["sdk.add"]')
    env = {"LLMC_APPROVAL_KEY": SHARED_KEY} if shared else {}
    assert llmc("call", "sdk.add", "a=1", "b=2", env=env).returncode == 4
    approved = llmc("policy", "approve", "sdk.add", "a=1", "b=2", "--write", env=env)
    assert approved.returncode == 0, approved.stderr
    if elsewhere:
        env["LLMC_STATE_DIR"] = str(isolated_dirs / "elsewhere")
    proc = llmc("call", "sdk.add", "a=1", "b=2", env=env)
    assert proc.returncode == code, proc.stderr
    assert llmc("call", "sdk.add", "a=1", "b=3", env=env).returncode == 4  # other arguments: not approved


def test_a_short_shared_key_is_a_config_error(isolated_dirs):
    write_profile(isolated_dirs / "config")
    proc = llmc("call", "sdk.echo", "message=x", env={"LLMC_APPROVAL_KEY": "short"})
    assert proc.returncode == 3 and "LLMC_APPROVAL_KEY" in proc.stderr and "short" not in proc.stderr.split(":", 1)[1]


def test_free_text_fields_are_masked(isolated_dirs):
    """A decision's reason quotes the argument it refused; the secret in it is masked like the
    arguments are."""
    write_profile(isolated_dirs / "config", '[policy.args."sdk.echo"]\nmessage = ["/allowed/**"]')
    proc = llmc("call", "sdk.echo", f"message=/etc/{SECRET}", env={"DEPLOY_TOKEN": SECRET})
    assert proc.returncode == 4
    [decision] = records(isolated_dirs / "state")
    assert decision["decision"] == "deny" and "***" in decision["reason"]
    assert SECRET not in (isolated_dirs / "state" / "audit.jsonl").read_text()


def test_a_flat_object_is_masked_as_the_walk_masks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Masker masks an object without nested values in one loop (a call's arguments): the same
    keys, order and values as the general walk, for keys that are secrets, contain one, name one,
    or mask alike (then the walk decides), and every kind of value."""
    import random

    from llmc_cli.config import secrets as secrets_module
    from llmc_cli.config.secrets import Masker

    masker = Masker(["hunter2hunter2", "tok_ABCDEF123456", "s3cr3tvalue"])
    keys: list[object] = ["message", "password", "api_key", "path", "hunter2hunter2", "x tok_ABCDEF123456", "tok_ABCDEF123456", 1]
    values: list[object] = [
        "plain",
        "hunter2hunter2",
        "a tok_ABCDEF123456 b",
        3,
        2.5,
        None,
        True,
        "",
        {"a": "b"},
        [1, "s3cr3tvalue"],
    ]
    rng = random.Random(34)
    cases = [{rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 5))} for _ in range(2000)]
    flat = [(masker(case), masker.strings(case)) for case in cases]
    monkeypatch.setattr(secrets_module, "_masked_flat", lambda *_: None)  # the walk alone
    for case, (by_name, by_text) in zip(cases, flat, strict=True):
        assert (by_name, list(by_name)) == (masker(case), list(masker(case)))
        assert (by_text, list(by_text)) == (masker.strings(case), list(masker.strings(case)))

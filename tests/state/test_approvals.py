"""Pre-approved call hashes in the state database: `policy approve --write` records the hash
there (not in the profile), and every machine that shares the database and the approval key
runs that exact call without a confirmation; other arguments, other profiles do not."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.audit.test_audit import write_profile
from tests.helpers import llmc

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)

CALL = ("sdk.echo", "message=deploy")


def test_an_approval_in_the_database_holds_on_every_machine(
    isolated_dirs: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMC_APPROVAL_KEY", "k" * 64)  # shared by the "machines" below
    write_profile(isolated_dirs)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    profile.write_text(profile.read_text() + 'confirm = ["sdk.echo"]\n')
    before = profile.read_text()
    denied = llmc("call", *CALL)
    assert denied.returncode == 4 and "no terminal" in denied.stderr

    approved = llmc("policy", "approve", *CALL, "--write")
    assert approved.returncode == 0, approved.stderr
    digest = json.loads(approved.stdout)["callHash"]
    assert json.loads(approved.stdout)["written"] is True and "PostgreSQL database 127.0.0.1:" in approved.stderr
    assert profile.read_text() == before  # recorded in the database, not the profile
    assert llmc("policy", "approve", *CALL, "--write").returncode == 0  # twice is one approval
    with psycopg.connect(state_url) as conn:
        assert conn.execute("SELECT profile, hash, tool FROM llmc_approved").fetchall() == [("default", digest, "sdk.echo")]

    assert json.loads(llmc("policy", "check", *CALL).stdout)["rule"] == "approved"
    assert llmc("call", *CALL).returncode == 0
    # Another machine: its own state directory (no approval.key, no files), the same database and key.
    monkeypatch.setenv("LLMC_STATE_DIR", str(isolated_dirs / "other-machine"))
    assert llmc("call", *CALL).returncode == 0
    assert llmc("call", "sdk.echo", "message=other").returncode == 4  # other arguments, other hash
    # Another profile with the same servers: the approval was for `default` only.
    (profile.parent / "ci.toml").write_text(before)
    assert llmc("-p", "ci", "call", *CALL).returncode == 4
    rules = [
        json.loads(line)["rule"]
        for line in llmc("audit", "tail", "-n", "100").stdout.splitlines()
        if json.loads(line)["event"] == "decision"
    ]
    assert rules == ["confirm: sdk.echo", "approved", "approved", "confirm: sdk.echo", "confirm: sdk.echo"]

"""A server that fails to start while printing the secret llmc handed it (a token in its env, a
debug line, a stack trace quoting its config): what llmc shows of it (the error line, the server's
stderr lines under it and in JSON `errors`, `-v`'s stderr lines) has the secret masked, as a
failure in the middle of a call already had. The real CLI with a real stdio server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc, profile_file

TOKEN = "tok-3f9a8c1d2e7b4a6f"  # a made-up secret, the point of the test
# Prints its token on stderr, as a careless server's start-up log does, then exits before the handshake.
LEAKER = "import os, sys; sys.stderr.write('starting, key=' + os.environ['API_KEY'] + '\\n'); sys.exit(1)"


@pytest.fixture
def leaky_profile(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.leaky]
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(LEAKER)}]
env = {{ API_KEY = "${{LEAKY_TOKEN}}" }}
""",
    )


@pytest.mark.parametrize(
    "argv, code",
    [
        (["tools", "list"], 5),
        (["tools", "list", "-v"], 5),
        (["ping"], 5),
        (["call", "leaky.anything"], 5),
        (["tools", "list", "--format", "jsonl"], 5),
    ],
)
def test_a_secret_a_failing_server_prints_is_masked(leaky_profile: None, argv: list[str], code: int) -> None:
    proc = llmc(*argv, env={"LEAKY_TOKEN": TOKEN})
    assert proc.returncode == code, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "starting, key=***" in proc.stderr  # the line is still shown, its secret masked


def test_a_literal_secret_given_to_an_ad_hoc_server_is_masked(isolated_dirs: Path) -> None:
    command = f"{sys.executable} -c {json.dumps(LEAKER)}"
    proc = llmc("tools", "list", "--stdio", command, "--env", f"API_KEY={TOKEN}", "-v")
    assert proc.returncode == 5, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "starting, key=***" in proc.stderr

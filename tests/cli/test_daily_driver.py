"""Issue 29, "Errors that lead somewhere" and "Commands that do what they look like": each
error a new user meets says what is wrong and how to go on, and each command does what it looks
like. Through the real CLI (in-process where a process proves nothing more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import llmc, llmc_in_process, profile_file, sdk_server


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- an unknown server name is a usage error with a suggestion --------------------------------------

UNKNOWN_SERVER = [
    ("tools", "list", "-s", "wrkspace"),
    ("call", "-s", "wrkspace", "workspace.read_file", "path=x"),
    ("resources", "list", "-s", "wrkspace"),
    ("prompts", "list", "-s", "wrkspace"),
    ("ping", "-s", "wrkspace"),
    ("servers", "show", "wrkspace"),
    ("servers", "remove", "wrkspace"),
    ("servers", "disable", "wrkspace"),
    ("auth", "logout", "wrkspace"),
    ("session", "forget", "-s", "wrkspace"),
]


@pytest.mark.parametrize("argv", UNKNOWN_SERVER, ids=[" ".join(a) for a in UNKNOWN_SERVER])
def test_an_unknown_server_is_a_usage_error_with_did_you_mean(isolated_dirs: Path, argv: tuple[str, ...]) -> None:
    llmc_in_process("profiles", "init")
    proc = llmc_in_process(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "has no server 'wrkspace' (did you mean 'workspace'?)" in one_line(proc.stderr)
    assert proc.stdout == ""


def test_an_unknown_server_far_from_any_lists_the_servers(isolated_dirs: Path) -> None:
    proc = llmc_in_process("tools", "list", "-s", "evv")
    assert proc.returncode == 2
    assert "has no server 'evv' (servers: workspace)" in one_line(proc.stderr)


def test_a_session_that_lacks_the_server_says_so_and_how_to_go_on(isolated_dirs: Path) -> None:
    """The session holds only the workspace server: a call of another server names the session,
    what it holds, and the two ways on."""
    started = llmc("session", "start", "dc")
    assert started.returncode == 0, started.stderr
    try:
        for argv in (["call", "everything.echo", "message=hi"], ["call", "-s", "everything", "echo"],
                     ["call", "everything.read_fil", "path=x"]):
            proc = llmc(*argv, env={"LLMC_SESSION": "dc"})
            assert proc.returncode == 2, proc.stderr
            line = one_line(proc.stderr)
            assert "session dc (in use) does not hold server 'everything' (it holds: workspace)" in line, line
            assert "llmc session start NAME -s everything" in line and "unset LLMC_SESSION" in line, line
    finally:
        llmc("session", "stop", "dc")

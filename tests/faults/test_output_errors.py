"""stdout that cannot take the output (a full disk, /dev/full): one line on stderr naming the
output and what to do, exit 3 as for a full state directory, never a traceback. The real process:
what is tested is its stdout, a file descriptor the in-process runner replaces."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, llmc_executable

STDIO = ["--stdio", shlex.join([sys.executable, str(PEERS / "sdk_server.py")])]

COMMANDS: list[tuple[str, list[str], bytes | None]] = [
    ("call", ["call", "add", "a=1", "b=2", *STDIO], None),
    ("tools list", ["tools", "list", *STDIO], None),
    ("servers list", ["servers", "list"], None),
    ("call --batch", ["call", "--batch", "-", *STDIO], b'{"tool": "add", "arguments": {"a": 1, "b": 2}}\n'),
]


@pytest.mark.e2e
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv, stdin", [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_a_full_stdout_is_one_line_and_exit_3(argv: list[str], stdin: bytes | None, isolated_dirs: Path) -> None:
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [llmc_executable(), *argv],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
            env=dict(os.environ),
        )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "Traceback" not in err, err
    failed = [line for line in err.splitlines() if "cannot write the output" in line]
    assert failed == [
        "llmc: cannot write the output (stdout): No space left on device; free some space or send stdout elsewhere"
    ], err

"""The approval key file is read as bytes and decoded (policy/approval.py _key_file): the key a
text-mode read gave, without the text file's codec lookup, which imported encodings.ascii on
every call's start-up (issue 34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli.errors import ConfigError
from llmc_cli.policy import approval

HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "content",
    [HEX + "\n", HEX + "\r\n", "  " + HEX + "\n\n", HEX[:32] + "\r" + HEX[32:] + "\n", HEX + "\r"],
    ids=["plain", "crlf", "blank around", "a lone carriage return inside", "ends in cr"],
)
def test_the_key_is_what_a_text_read_of_the_file_gives(tmp_path: Path, content: str) -> None:
    path = tmp_path / "approval.key"
    path.write_bytes(content.encode("ascii"))
    assert approval._key_file.__wrapped__(path) == path.read_text(encoding="ascii", errors="replace").strip().encode()


def test_a_key_that_is_not_ascii_is_still_damaged(tmp_path: Path) -> None:
    path = tmp_path / "approval.key"
    path.write_bytes(b"\xff" * 70 + b"\n")
    with pytest.raises(ConfigError, match="not ASCII text"):
        approval._key_file.__wrapped__(path)


def test_reading_the_key_looks_no_codec_up(tmp_path: Path) -> None:
    path = tmp_path / "approval.key"
    path.write_text(HEX + "\n", encoding="ascii")
    code = (
        "import sys\nfrom pathlib import Path\nfrom llmc_cli.policy import approval\n"
        "assert 'encodings.ascii' not in sys.modules\n"
        f"assert approval._key_file(Path({str(path)!r})) == {HEX!r}.encode()\n"
        "print('encodings.ascii' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"

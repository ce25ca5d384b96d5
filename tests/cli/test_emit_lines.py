"""cli.output.emit_lines (`call --batch`'s results): on a UTF-8 stdout it writes the bytes of each
line itself; they must be the very bytes the text path writes, escapes included (DEL, C1 and
bidi controls, line separators, lone surrogates), and any other stdout gets the text path."""

from __future__ import annotations

import io
from typing import Any

import pytest

from llmc_cli import model
from llmc_cli.cli import output

ITEMS: list[Any] = [
    {"id": 1, "content": [{"type": "text", "text": "Echo: 1"}], "isError": False, "durationMs": 0.5},
    {"id": "é山😀", "text": "caf\u00e9 \u2028 \u202e \x7f \x85 tab\tnewline\n"},
    {"id": 3, "text": "lone \ud800 surrogate"},
    {"id": 4, "x": [1e-7, 0.00001, float("nan"), 2**70, None]},
    {"id": 5, "text": "DEL only \x7f"},
]


def written(encoding: str, monkeypatch: pytest.MonkeyPatch, text_path: bool = False) -> bytes:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="backslashreplace", newline="\n")
    monkeypatch.setattr("sys.stdout", stream)
    for _ in range(2):  # before and after the encoders move to orjson (a process's first encodings are json's)
        for _ in range(model._FAST_AFTER):
            model.compact_json({"warm": 1})
        write, flush = output._text_lines() if text_path else output.emit_lines()
        for item in ITEMS:
            write(item)
        flush()
    stream.flush()
    return raw.getvalue()


def test_the_bytes_written_are_the_text_path_s(monkeypatch: pytest.MonkeyPatch) -> None:
    direct = written("utf-8", monkeypatch)
    assert direct == written("utf-8", monkeypatch, text_path=True)
    lines = direct.decode("utf-8").splitlines()
    assert len(lines) == 2 * len(ITEMS)
    assert "\\u2028" in lines[1] and "\\u007f" in lines[1] and "\\ud800" in lines[2]  # escaped, not raw
    assert "\x7f" not in direct.decode("utf-8")


def test_a_stdout_of_another_encoding_gets_the_text_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # latin-1 cannot write the CJK id: the text layer's errors handler decides, as it always did
    latin = written("latin-1", monkeypatch)
    assert latin == written("latin-1", monkeypatch, text_path=True)
    assert latin != written("utf-8", monkeypatch)

"""model.compact_json and canonical_json on PyPI package orjson (the `fast` extra) after a
process's first encodings: byte for byte the text json.dumps gives, on every value (what orjson
writes otherwise goes to json: floats below 1e-4, NaN, huge integers, lone surrogates, subclasses),
so every hash, HMAC and audit chain is the same; a chain written by either verifies under the other."""

from __future__ import annotations

import enum
import json
import math
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmc_cli import model
from llmc_cli.audit import AuditLog

orjson = pytest.importorskip("orjson")

FAST_CANONICAL = model._fast(model._STDLIB_CANONICAL, True)
FAST_COMPACT = model._fast(model._STDLIB_COMPACT, False)
FAST_BYTES = model._fast_bytes(model._STDLIB_CANONICAL)


def stdlib(value: object, sort_keys: bool) -> str:
    return json.dumps(value, sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":"))


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


class Count(int):
    pass


class Ratio(float):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


# Keys around the audit record's own (time, prev, hash, callHash, ...), non-ASCII, empty, prefixes
KEYS = ["time", "prev", "hash", "callHash", "arguments", "a", "", "Z", "z", "é", "ÿ", "ā", "山", "😀", "tim", "timex", "pre", "h"]
SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1.0,
    5.1,
    100.0,
    1e15,
    1e16,
    1.5e16,
    1e22,
    1e-4,
    0.0001,
    9.99e-5,
    1e-5,
    1e-7,
    1.5e-9,
    1e-10,
    2.5e-300,
]
SPECIAL_FLOATS += [5e-324, 1.7976931348623157e308, math.nan, math.inf, -math.inf, 0.1, 1 / 3]
INTS = [0, -1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**100, -(2**100)]
TEXT = 'aZ09 "\\/\b\f\n\r\t\x00\x01\x1f\x7f\x80\x9f\xa0é山😀\u2028\u2029\u200e\ufeff\uffff{}[],:e-0.0000null'


def text(rnd: random.Random) -> str:
    out = "".join(rnd.choice(TEXT) for _ in range(rnd.randrange(0, 12)))
    if rnd.random() < 0.03:
        out += rnd.choice(["\ud800", "\udfff", "\udbff\udc00"])  # lone surrogates (and a pair written apart)
    return out


def number(rnd: random.Random) -> object:
    pick = rnd.random()
    if pick < 0.3:
        return rnd.choice(SPECIAL_FLOATS)
    if pick < 0.45:
        return struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
    if pick < 0.6:
        return float(f"{rnd.random() * 10:.{rnd.randrange(1, 17)}f}e{rnd.randrange(-12, 20)}")
    if pick < 0.7:
        return round(rnd.uniform(0, 100_000), 1)  # a duration
    if pick < 0.85:
        return rnd.choice(INTS)
    return rnd.randrange(-1000, 1000)


def value(rnd: random.Random, depth: int = 0) -> Any:
    pick = rnd.random()
    if depth < 4 and pick < 0.25:
        keys = [rnd.choice(KEYS) if rnd.random() < 0.6 else text(rnd) for _ in range(rnd.randrange(0, 8))]
        return {k: value(rnd, depth + 1) for k in keys}
    if depth < 4 and pick < 0.4:
        items = [value(rnd, depth + 1) for _ in range(rnd.randrange(0, 5))]
        return tuple(items) if rnd.random() < 0.1 else items
    if pick < 0.6:
        return text(rnd)
    if pick < 0.85:
        return number(rnd)
    if pick < 0.9:
        return rnd.choice([True, False, None])
    return rnd.choice([Level.HIGH, Name("named"), Count(7), Ratio(0.5), Mapping(b=1, a=[1e-7])])


def test_the_fast_encoders_write_what_json_writes_on_generated_values() -> None:
    rnd = random.Random(34)
    for _ in range(4000):
        v = {k: value(rnd) for k in rnd.sample(KEYS, rnd.randrange(1, len(KEYS)))}  # a record's shape
        assert FAST_CANONICAL(v) == stdlib(v, True), v
        assert FAST_COMPACT(v) == stdlib(v, False), v
        w = value(rnd)
        assert FAST_CANONICAL(w) == stdlib(w, True), w
        assert FAST_COMPACT(w) == stdlib(w, False), w


def test_every_float_text_is_json_s() -> None:
    rnd = random.Random(7)
    floats = SPECIAL_FLOATS + [struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20000)]
    floats += [float(f"{rnd.random() * 10}e{e}") for e in range(-330, 310) for _ in range(20)]
    for f in floats:
        assert FAST_COMPACT([f, {"x": -f}]) == stdlib([f, {"x": -f}], False), f


def test_what_json_refuses_is_refused_alike() -> None:
    for bad in ({"x": {1, 2}}, {"x": object()}, {"x": b"bytes"}):
        with pytest.raises(TypeError):
            FAST_CANONICAL(bad)
        with pytest.raises(TypeError):
            stdlib(bad, True)
    deep: list[Any] = []
    for _ in range(400):  # deeper than orjson writes: json's text
        deep = [deep]
    assert FAST_COMPACT(deep) == stdlib(deep, False)
    mixed = {1: "a", "b": 2}  # keys that are not str: json's text (and its TypeError when sorting)
    assert FAST_COMPACT(mixed) == stdlib(mixed, False)
    with pytest.raises(TypeError):
        FAST_CANONICAL(mixed)


def test_a_process_switches_after_its_first_encodings_and_a_short_one_never_imports_orjson() -> None:
    script = f"""
import sys
from llmc_cli import model
for i in range({model._FAST_AFTER - 1}):
    model.canonical_json({{"i": i}})
print("orjson" in sys.modules, model._CANONICAL.__qualname__)
model.compact_json([1])
print("orjson" in sys.modules, model._CANONICAL.__qualname__, model._COMPACT.__qualname__)
print(model.canonical_json({{"b": 1e-7, "a": "é"}}), model.compact_json({{"b": 1, "a": None}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "False _counting.<locals>.encode"
    assert out[1] == "True _fast.<locals>.encode _fast.<locals>.encode"
    assert out[2] == '{"a":"é","b":1e-07} {"b":1,"a":null}'


RECORDS: list[dict[str, Any]] = [
    {"time": "2026-11-28T11:00:00.000Z", "event": "decision", "arguments": {"message": "Zoë 山田 😀", "n": 1e-7}, "pid": 7},
    {"time": "2026-11-28T11:00:00.001Z", "event": "outcome", "durationMs": 5.1, "resultBytes": 48, "result": {"x": math.nan}},
    {"time": "2026-11-28T11:00:00.002Z", "event": "outcome", "durationMs": 0.0, "big": 2**70, "text": "\u2028 \x7f \t"},
    {"time": "2026-11-28T11:00:00.003Z", "event": "decision", "arguments": {"z": [1, 2.5, None, True], "a": {"é": "e"}}},
]


def write(path: Path, encoders: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(model, "_COMPACT", encoders[0])
        patch.setattr(model, "_CANONICAL", encoders[1])
        patch.setattr(model, "_CANONICAL_BYTES", encoders[2])
        log = AuditLog(path)
        for record in RECORDS:
            log.append(dict(record))  # type: ignore[arg-type]  # fields of every kind, on purpose
        log.release()
    return path.read_text(encoding="utf-8")


def test_a_chain_is_the_same_bytes_either_way_and_verifies_under_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdlib_encoders = (model._STDLIB_COMPACT, model._STDLIB_CANONICAL, model._canonical_bytes)
    fast_encoders = (FAST_COMPACT, FAST_CANONICAL, FAST_BYTES)
    before = write(tmp_path / "before.jsonl", stdlib_encoders, monkeypatch)
    after = write(tmp_path / "after.jsonl", fast_encoders, monkeypatch)
    assert before == after and before.count("\n") == len(RECORDS)  # (not splitlines: U+2028 is no line end here)
    for encoders in (stdlib_encoders, fast_encoders):
        with monkeypatch.context() as patch:
            patch.setattr(model, "_COMPACT", encoders[0])
            patch.setattr(model, "_CANONICAL", encoders[1])
            patch.setattr(model, "_CANONICAL_BYTES", encoders[2])
            for name in ("before.jsonl", "after.jsonl"):
                report = AuditLog(tmp_path / name).verify()
                assert report == {**report, "ok": True, "records": len(RECORDS)}
    # a chain written before, continued after: one chain
    write(tmp_path / "before.jsonl", fast_encoders, monkeypatch)
    report = AuditLog(tmp_path / "before.jsonl").verify()
    assert report == {**report, "ok": True, "records": 2 * len(RECORDS)}


def outcome(load: Any, text: str) -> tuple[str, object]:
    try:
        return "value", repr(load(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


def test_json_loads_reads_what_json_reads_and_refuses_alike() -> None:
    rnd = random.Random(5)
    texts = ["", " ", "{}", " {} ", "{} ", "\n[1]\n", "{}x", "[1,]", "01", "NaN", "-Infinity", "1e400", str(2**70)]
    texts += ['"\\ud800"', '{"a":1,"a":2}', "\ufeff{}", '"a\x00"', "[" * 3000 + "]" * 3000, "tru", "null", '"é山😀"']
    for _ in range(3000):
        text = json.dumps(value(rnd), ensure_ascii=rnd.random() < 0.5)
        texts.append(text)
        cut = rnd.randrange(len(text) + 1)
        texts.append(text[:cut])  # most of them broken
        texts.append(text[:cut] + rnd.choice(["", " ", ",", "]", "}", '"', "\\", "x"]) + text[cut:])
    for text in texts:
        assert outcome(model.json_loads, text) == outcome(json.loads, text), text


FAST_LINE = model._fast_line(model._STDLIB_COMPACT)


def test_the_line_encoder_writes_json_s_text_and_a_newline_as_utf8() -> None:
    """compact_json_line (a stdio server's input): the bytes of compact_json's text and a newline,
    whatever orjson would write otherwise (floats, NaN, huge integers), and UnicodeEncodeError
    for a lone surrogate, as encoding that text raised."""
    rnd = random.Random(35)
    values: list[Any] = [[f, {"x": -f}] for f in SPECIAL_FLOATS] + [{"n": i} for i in INTS]
    for _ in range(4000):
        values.append({k: value(rnd) for k in rnd.sample(KEYS, rnd.randrange(1, len(KEYS)))})
        values.append(value(rnd))
    for v in values:
        try:
            expected = (stdlib(v, False) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            with pytest.raises(UnicodeEncodeError):
                FAST_LINE(v)
            continue
        assert FAST_LINE(v) == expected, v

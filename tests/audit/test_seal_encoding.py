"""The audit seal on orjson (issue 34, session 14): a record is hashed and stored as the bytes
model.canonical_json_bytes gives, and only what can hold a float from outside is searched for one
orjson writes otherwise than json (the arguments, or the whole record when it carries a result,
a client or findings). Every sealed line is byte for byte what json.dumps(sort_keys=True,
ensure_ascii=False, separators=(",", ":")) gives, whichever encoder sealed it."""

from __future__ import annotations

import ast
import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from llmc_cli import model
from llmc_cli.audit import AuditLog
from llmc_cli.audit.trail import FOREIGN_FIELDS, sealer
from llmc_cli.mcp.jsonrpc import replace_lone_surrogates
from llmc_cli.services.pipeline import tenths_of_ms
from llmc_cli.store.chain import GENESIS
from tests.test_json_fast import KEYS, value

orjson = pytest.importorskip("orjson")

FAST_BYTES = model._fast_bytes(model._STDLIB_CANONICAL)
CHAIN = Path(__file__).resolve().parents[2] / "llmc_cli" / "store" / "chain.py"

# Values orjson writes otherwise than json, or refuses, or that look like it in text
ADVERSARIAL: list[Any] = [1e-05, 1e-7, 1.5e-9, 9.99e-5, 1e-4, 1e20, 1e16, 1e22, math.nan, math.inf, -math.inf]
ADVERSARIAL += [-0.0, 0.0, 0.5, 2**63, 2**64, 2**70, -(2**63) - 1, 10**40, "\ud800", "x\udfff y", "\udbff\udc00"]
ADVERSARIAL += ["été 😀 山", "\u2028\x7f\t", "null", "0.0000", "1e-7", {"a": [{"b": 1e-05}]}, [1e-7, None], {"n": None}]
ADVERSARIAL += [{"é": 1e-6, "z": "s"}, True, None, [], {}, {"deep": [[[[2.5e-300]]]]}, {"ok": "text", "n": 3}]

BASE: dict[str, Any] = {  # a batch call's record, as services builds it
    "time": "2026-11-29T05:45:20.474Z",
    "user": "root",
    "host": "vm",
    "pid": 12149,
    "profile": "builtin:default",
    "command": "batch",
    "server": "mcp-server-everything",
    "tool": "echo",
    "arguments": {"message": "77"},
    "callHash": "hmac-sha256:99ba181f5e257e2072ea66b7804669c789a2fd74e4b99f225393777ab661fb29",
    "event": "outcome",
    "outcome": "ok",
    "durationMs": 1.3,
    "resultBytes": 46,
    "resultSha256": "05c6df5659b0804b15da43f1f1023a914ed457083d27f7ba29f686c8630e0d29",
}


def stdlib(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def as_json_seals(record: dict[str, Any], prev: str = GENESIS) -> str:
    """The line json's encoder seals: the record with its time and prev, lone surrogates
    replaced, canonical text, its hash last."""
    full = replace_lone_surrogates({**record, "prev": prev})
    text = stdlib(full)
    return f'{text[:-1]},"hash":"{hashlib.sha256(text.encode("utf-8")).hexdigest()}"}}'


def sealed(record: dict[str, Any], encoder: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(model, "_CANONICAL_BYTES", encoder)
        patch.setattr(model, "_CANONICAL", model._STDLIB_CANONICAL)  # json's text in the stdlib's path
        written: list[dict[str, Any]] = []
        (line,) = sealer([record], written)(GENESIS, 0)  # type: ignore[list-item]  # any record, on purpose
    return line.decode("utf-8")


def test_the_fields_not_searched_are_declared_text_or_integers() -> None:
    """What the seal does not search is what AuditRecord declares str, int or str | None; the rest
    are FOREIGN_FIELDS and durationMs (llmc's own float: an elapsed time rounded to 0.1 ms)."""
    tree = ast.parse(CHAIN.read_text(encoding="utf-8"))
    (record,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "AuditRecord"]
    fields = {
        n.target.id: ast.unparse(n.annotation)
        for n in record.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    not_text = {name for name, kind in fields.items() if kind not in ("str", "int", "str | None")}
    assert not_text == {*FOREIGN_FIELDS, "durationMs"}
    assert fields["durationMs"] == "float" and len(fields) > 20


@pytest.mark.parametrize("field", FOREIGN_FIELDS)
def test_a_foreign_value_is_sealed_as_json_writes_it(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each adversarial value in each field that can come from outside, on its own and inside
    the arguments: the line and its hash are json's (orjson's 0.00001, 1e-7 or null would not be)."""
    for bad in ADVERSARIAL:
        for record in ({**BASE, field: bad}, {**BASE, field: {"x": bad, "message": "a"}}):
            expected = as_json_seals(record)
            assert sealed(record, FAST_BYTES, monkeypatch) == expected, (field, bad)
            assert sealed(record, model._canonical_bytes, monkeypatch) == expected, (field, bad)


def test_a_record_without_arguments_or_with_several_foreign_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = {k: v for k, v in BASE.items() if k != "arguments"}  # a read's, an interruption's
    many = {**BASE, "client": {"name": "host", "version": 1.5e-5}, "findings": [{"score": 1e-7}], "result": {"n": math.inf}}
    for record in (plain, many, {**plain, "durationMs": 0.0}, {**BASE, "rule": None, "reason": "null 0.0000 1e-7"}):
        assert sealed(record, FAST_BYTES, monkeypatch) == as_json_seals(record), record


def test_canonical_json_bytes_is_json_s_text_on_generated_values() -> None:
    """Generated values: the whole checked (foreign=EVERYTHING), and records of the caller's own
    scalars around a generated foreign part (foreign=that part): UTF-8 of json's text, or the
    UnicodeEncodeError of a lone surrogate alike."""
    rnd = random.Random(14)
    own_values: list[Any] = ["text", "null 0.0000 1e-7 e-", 0, -1, 2**63 - 1, True, None, "é😀", 1.3, 0.0, 12345.6]

    def expected(v: object) -> bytes | type[Exception]:
        try:
            return stdlib(v).encode("utf-8")
        except UnicodeEncodeError:
            return UnicodeEncodeError

    def got(v: object, foreign: object) -> bytes | type[Exception]:
        try:
            return FAST_BYTES(v, foreign)
        except UnicodeEncodeError:
            return UnicodeEncodeError

    for _ in range(3000):
        whole = value(rnd)
        assert got(whole, model.EVERYTHING) == expected(whole), whole
        part = value(rnd)
        record = {k: rnd.choice(own_values) for k in rnd.sample(KEYS, rnd.randrange(0, 8)) if k != "arguments"}
        record["arguments"] = part
        assert got(record, part) == expected(record), record


def test_durations_rounded_to_a_tenth_of_a_millisecond_are_written_alike() -> None:
    """durationMs is never searched: every value services writes (round(ms, 1), 0 up) is json's text."""
    rnd = random.Random(3)
    durations = [round(i * 0.1, 1) for i in range(0, 200_000, 7)]
    durations += [round(rnd.uniform(0, 10.0**e), 1) for e in range(18) for _ in range(500)]
    for d in durations:
        assert FAST_BYTES({"durationMs": d}, None) == stdlib({"durationMs": d}).encode("utf-8"), d


def test_durations_made_from_nanoseconds_are_the_tenths_round_gives() -> None:
    """services' durations (pipeline.tenths_of_ms, inline in the pipeline and the batch) are the
    floats round(ms, 1) gives (but at an exact half, which rounds up), so written alike too."""
    rnd = random.Random(5)
    spans = [*range(0, 3_000_000, 997), *(rnd.randrange(10**e) for e in range(1, 16) for _ in range(2000))]
    for ns in spans:
        if ns % 100_000 != 50_000:
            assert tenths_of_ms(ns) == round(ns / 1e6, 1), ns
        assert FAST_BYTES({"durationMs": tenths_of_ms(ns)}, None) == stdlib({"durationMs": tenths_of_ms(ns)}).encode("utf-8")


def test_a_log_written_by_either_encoder_in_turn_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "audit.jsonl"
    records = [{**BASE, "arguments": {"x": bad}} for bad in ADVERSARIAL]
    for i, record in enumerate(records):
        with monkeypatch.context() as patch:
            patch.setattr(model, "_CANONICAL_BYTES", FAST_BYTES if i % 2 else model._canonical_bytes)
            log = AuditLog(path)
            log.append({k: v for k, v in record.items() if k != "time"})  # type: ignore[arg-type]
            log.release()
    report = AuditLog(path).verify()
    assert report == {**report, "ok": True, "records": len(records)}


def test_a_chain_of_varied_records_with_waited_own_and_stamped_times() -> None:
    """Several records in one seal, as a batch's Deferred writes them: the first with the times
    they waited with (one of them carrying its own, which is kept), the rest stamped once when
    sealed. Each line is json's canonical text of the record with its time and prev, its hash
    last, each chained to the one before; sealing again (a store's retry) gives the same lines."""
    varied: list[dict[str, Any]] = [
        BASE,
        {**BASE, "arguments": {"nested": {"é": [1, 2.5, {"deep": "😀 山"}]}, "big": 2**70, "neg": -(2**63) - 1}},
        {**BASE, "arguments": {"f": 1e-05, "g": 0.5, "token": "***"}, "event": "decision", "decision": "allow"},
        {k: v for k, v in BASE.items() if k not in ("time", "arguments")},  # an outcome: no arguments, no time
        {**BASE, "time": "2026-11-29T05:45:21.000Z", "result": {"text": "null 0.0000", "n": 1e-7}},
        {k: v for k, v in BASE.items() if k != "time"},
        {**{k: v for k, v in BASE.items() if k != "time"}, "client": {"name": "host", "version": 1.5e-5}},
    ]
    waited = ["2026-11-29T05:45:22.001Z", "2026-11-29T05:45:22.002Z", "2026-11-29T05:45:22.003Z", "x", "y"]
    written: list[dict[str, Any]] = []
    seal = sealer(varied, written, waited)  # type: ignore[arg-type]  # any records, on purpose
    for _ in range(2):  # sealed again (a store's retry): the same lines but for the stamp, which is the new seal's
        lines = seal(GENESIS, 0)
        assert len(lines) == len(written) == len(varied)
        stamp = json.loads(lines[-1])["time"]  # the records past `waited` (none with a time of its own) share it
        assert [json.loads(line)["time"] for line in lines[len(waited) :]] == [stamp, stamp]
        prev = GENESIS
        for i, (record, line) in enumerate(zip(varied, lines, strict=True)):
            time = record.get("time") or (waited[i] if i < len(waited) else stamp)
            assert line.decode("utf-8") == as_json_seals({**record, "time": time}, prev), i
            prev = json.loads(line)["hash"]
            assert written[i] == json.loads(line)


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json"])
def test_a_seal_that_keeps_no_record_seals_the_same_lines(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seal that keeps nothing (a batch's writers discard the records as stored) seals what one
    that keeps them seals, json's canonical text, on either encoder: arguments of text, integers,
    booleans and nulls go as orjson's bytes, the rest (a float, a lone surrogate, a 70-bit integer,
    arguments that are no object) as canonical_json_bytes decides."""
    arguments: list[Any] = [{"m": "x", "n": 3, "b": True, "z": None}, {"f": 1e-05}, {"s": "\ud800"}, {"big": 2**70}, [1e-7], {}]
    records: list[Any] = [*({**BASE, "arguments": a} for a in arguments), {k: v for k, v in BASE.items() if k != "arguments"}]
    with monkeypatch.context() as patch:
        patch.setattr(model, "_CANONICAL_BYTES", FAST_BYTES if fast else model._canonical_bytes)
        written: list[dict[str, Any]] = []
        kept, unkept = sealer(records, written)(GENESIS, 0), sealer(records, None)(GENESIS, 0)
    assert kept == unkept and len(written) == len(records)
    prev = GENESIS
    for record, line in zip(records, unkept, strict=True):
        assert line.decode("utf-8") == as_json_seals(record, prev), record
        prev = json.loads(line)["hash"]


def test_the_writers_that_discard_their_records_keep_none(tmp_path: Path) -> None:
    """append_many(kept=False), a batch's decisions and outcomes: [] back, the log as ever."""
    log = AuditLog(tmp_path / "audit.jsonl")
    record: Any = {k: v for k, v in BASE.items() if k != "time"}
    assert log.append_many([record, record], kept=False) == []
    assert [r["prev"] for r in log.append_many([record])] != [GENESIS]
    log.release()
    report = AuditLog(tmp_path / "audit.jsonl").verify()
    assert report == {**report, "ok": True, "records": 3}

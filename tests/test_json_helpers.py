"""Canonical and compact JSON come from model.py alone (compact_json, canonical_json): no other
module writes its own `json.dumps(..., separators=...)`; the gateway's requestState, written in
the compact form, carries any JSON value a host answers with through to unpack unchanged."""

from __future__ import annotations

import ast
from pathlib import Path

from llmc_cli.gateway.request_state import RequestStates
from llmc_cli.model import JSONObject, ToolCall, canonical_json, compact_json

PACKAGE = Path(__file__).resolve().parent.parent / "llmc_cli"


def _hand_written_dumps() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "model.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "dumps"
                and any(k.arg == "separators" for k in node.keywords)
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_compact_and_canonical_json_are_written_in_model_py_only() -> None:
    assert _hand_written_dumps() == [], "use model.compact_json or model.canonical_json"


def test_the_helpers() -> None:
    assert compact_json({"b": "é", "a": [1, None]}) == '{"b":"é","a":[1,null]}'
    assert canonical_json({"b": "é", "a": [1, None]}) == '{"a":[1,null],"b":"é"}'


def test_a_request_state_carries_any_answer_unchanged() -> None:
    states = RequestStates()
    call = ToolCall("s", "t", {"path": "ça"})
    answers: JSONObject = {"a1": {"action": "accept", "content": {"name": "Zoë 山田", "odd": "\ud800", "n": 1.5}}}
    token = states.pack(call, True, answers, principal="alice")
    assert token.isascii()
    assert states.unpack(call, token, "alice") == (True, answers)
    assert states.unpack(call, token, "bob") == (False, {})
    assert states.unpack(ToolCall("s", "t", {"path": "ca"}), token, "alice") == (False, {})

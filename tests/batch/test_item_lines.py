"""A batch line's JSON (BatchItem.to_json): a call's result line is {id, server, tool}, then the
fields of `llmc call`'s output (ToolResult.to_json) in their order, `cached`, then durationMs;
the one-dict path for results makes the very bytes the general composition makes."""

from __future__ import annotations

from typing import Any

import pytest

from llmc_cli.errors import PolicyDenied, UsageError
from llmc_cli.model import ToolCall, ToolResult, compact_json_line
from llmc_cli.services.batch import BatchItem


def composed(item: BatchItem) -> dict[str, Any]:
    """The line as composed before the one-dict path: the result's to_json merged in."""
    out: dict[str, Any] = {"id": item.id}
    if item.call is not None:
        out["server"], out["tool"] = item.call.server, item.call.tool
    if item.error is not None:
        out["error"] = item.error.to_json()
    elif item.result is not None:
        out.update(item.result.to_json())
        if item.result.cached:
            out["cached"] = True
    out["durationMs"] = item.duration_ms
    return out


RESULTS = [
    ToolResult([{"type": "text", "text": "Echo: 1"}]),
    ToolResult([], is_error=True),
    ToolResult([{"type": "text", "text": "é"}], structured_content={"a": [1, 2.5]}, meta={"k": "v"}),
    ToolResult([], structured_content={}, meta={}, cached=True),
    ToolResult([{"type": "image", "data": "AA==", "mimeType": "image/png"}], cached=True, is_error=True),
]


@pytest.mark.parametrize("result", RESULTS)
@pytest.mark.parametrize("ident", [7, "a", None, {"nested": [1]}])
def test_a_result_line_is_the_composed_line(result: ToolResult, ident: Any) -> None:
    item = BatchItem(0, ident, "srv.tool", {"x": 1}, ToolCall("srv", "tool", {"x": 1}))
    item.result, item.duration_ms = result, 1.5
    line = item.to_json()
    assert list(line) == list(composed(item))  # the keys' order is the output's
    assert compact_json_line(line) == compact_json_line(composed(item))


@pytest.mark.parametrize(
    "item",
    [
        BatchItem(3, 1, error=UsageError("line 4: a batch line must be a JSON object")),
        BatchItem(0, 2, "srv.tool", {}, ToolCall("srv", "tool", {}), error=PolicyDenied("denied: no [rule]", rule="rule")),
        BatchItem(0, 3, "srv.tool", {}, ToolCall("srv", "tool", {})),  # interrupted: neither result nor error
    ],
)
def test_other_lines_are_as_before(item: BatchItem) -> None:
    assert compact_json_line(item.to_json()) == compact_json_line(composed(item))


def test_many_makes_the_items_init_makes() -> None:
    """BatchItem.many (a batch's items, without __init__'s call each): every field as
    BatchItem(...) sets it, for a line read and for a line that carries its error."""
    error = UsageError("line 2: a batch line must be a JSON object")
    lines: list[Any] = [(0, 7, "srv.tool", {"x": 1}, None), (1, None, "", None, error)]
    made = [BatchItem(0, 7, "srv.tool", {"x": 1}), BatchItem(1, None, error=error)]
    for item, expected in zip(BatchItem.many(lines), made, strict=True):
        assert {slot: getattr(item, slot) for slot in BatchItem.__slots__} == {
            slot: getattr(expected, slot) for slot in BatchItem.__slots__
        }

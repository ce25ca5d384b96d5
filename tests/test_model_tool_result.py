"""ToolResult.from_mcp: a CallToolResult's content objects kept in order, anything else in the
list dropped, and the list its own (a later change to the raw result's list does not reach it)."""

from __future__ import annotations

from typing import Any

import pytest

from llmc_cli.model import ToolResult


class _Sub(dict):  # type: ignore[type-arg]
    """A dict subclass: an object as isinstance sees it (kept, as the comprehension kept it)."""


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        ([{"type": "text", "text": "a"}], [{"type": "text", "text": "a"}]),
        ([], []),
        (
            [{"type": "text", "text": "a"}, "odd", 3, None, {"type": "text", "text": "b"}],
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        ),
        (["odd"], []),
        ([_Sub(type="text", text="s")], [{"type": "text", "text": "s"}]),
        ("not a list", []),
        (None, []),
        ({"type": "text"}, []),
    ],
)
def test_content_objects_are_kept_in_order(content: Any, kept: list[Any]) -> None:
    result = ToolResult.from_mcp({"content": content, "isError": True, "structuredContent": {"n": 1}, "_meta": {"k": 1}})
    assert result.content == kept
    assert (result.is_error, result.structured_content, result.meta, result.duration_ms, result.cached) == (
        True,
        {"n": 1},
        {"k": 1},
        None,
        False,
    )
    assert result == ToolResult(kept, {"n": 1}, True, {"k": 1})


def test_the_content_list_is_its_own() -> None:
    raw: dict[str, Any] = {"content": [{"type": "text", "text": "a"}]}
    result = ToolResult.from_mcp(raw)
    raw["content"].append({"type": "text", "text": "later"})
    assert result.content == [{"type": "text", "text": "a"}]


def test_no_content_and_odd_fields() -> None:
    result = ToolResult.from_mcp({"isError": 0, "_meta": "not an object"})
    assert result == ToolResult([], None, False, None)

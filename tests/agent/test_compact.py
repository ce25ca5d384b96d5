"""Compaction of large results and progress lines, without a model."""

from __future__ import annotations

from llmc_cli.agent import compact, progress_line
from llmc_cli.model import Tool, ToolResult


def result(text: str, *extra: dict) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": text}, *extra])


def test_small_results_pass_unchanged():
    r = result("short")
    assert compact(r, 100) == (r, None)


def test_cut_at_line_boundary_with_a_note_naming_paging_arguments():
    tool = Tool("fs", "read", {"type": "object", "properties": {"path": {}, "offset": {}, "limit": {}}})
    seen, info = compact(result("".join(f"{i}\n" for i in range(100, 200))), 42, tool)
    text = seen.content[0]["text"]
    assert text.startswith("100\n101\n") and "\n109\n[llmc: output cut to 40 of 400 characters" in text
    assert "90 of 100 lines (360 characters) left out" in text
    assert "call read again with offset, limit to read from line 11 on" in text
    assert info == {"characters": 400, "charactersShown": 40, "lines": 100, "linesShown": 10}


def test_one_huge_line_is_cut_inside_and_other_parts_kept():
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    seen, info = compact(result("x" * 1000, image), 100)
    assert seen.content[0]["text"].startswith("x" * 100 + "\n[llmc: output cut to 100 of 1000")
    assert "a narrower query, a range or an offset" in seen.content[0]["text"]
    assert seen.content[1] == image and info["linesShown"] == 0


def test_error_flag_survives_and_embedded_text_resources_count():
    r = ToolResult(content=[{"type": "resource", "resource": {"uri": "file:///a", "text": "a\n" * 300}}], is_error=True)
    seen, info = compact(r, 100)
    assert seen.is_error and info["characters"] == 600


def test_progress_lines():
    assert (
        progress_line({"event": "tool_end", "step": 2, "tool": "fs.read", "outcome": "ok", "durationMs": 12.3})
        == "[step 2] fs.read: ok (12 ms)"
    )
    assert progress_line({"event": "model", "step": 1}) == "[step 1] asking the model..."
    assert progress_line({"event": "other"}) is None
    # a call the model was told failed: what it was told; no duration when it never ran
    assert (
        progress_line(
            {
                "event": "tool_end",
                "step": 1,
                "tool": "nope",
                "outcome": "unknown_tool",
                "durationMs": None,
                "message": "there is no tool named 'nope'",
            }
        )
        == "[step 1] nope: unknown_tool: there is no tool named 'nope'"
    )

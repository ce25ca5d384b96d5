"""The text protocol's streamed prose: tool blocks are held back however the pieces are cut."""

from __future__ import annotations

import pytest

from llmc_cli.providers.text import _ProseOnly

REPLY = "Let me look.\n<mcp:tool>\nname: read\nparameters: {}\n</mcp:tool>"


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 13, 14, 15, 16, 17, len(REPLY)])
def test_prose_streams_and_tool_blocks_do_not(cut):
    shown: list[str] = []
    prose = _ProseOnly(shown.append)
    for i in range(0, len(REPLY), cut):
        prose(REPLY[i : i + cut])
    assert "".join(shown) == "Let me look.\n"


def test_a_lone_angle_bracket_is_prose():
    shown: list[str] = []
    prose = _ProseOnly(shown.append)
    for piece in ("a <", "b> c"):
        prose(piece)
    assert "".join(shown) == "a <b> c"

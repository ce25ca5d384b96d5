"""One message is at most LLMC_MAX_MESSAGE_BYTES (64 MiB by default) on every transport: a server
that sends an endless line, event or body is stopped at the limit, not read into memory, and the
command ends with exit 6 naming the limit. Misbehaving servers send 4 MB against a limit lowered
to 1 MiB, so the test stays fast; the real CLI."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.helpers import PEERS, llmc

LIMIT = 1024 * 1024
ENV = {"LLMC_MAX_MESSAGE_BYTES": str(LIMIT)}

# (variant, how to reach the server: ("url", PATH on the misbehaving HTTP server) or ("stdio", MODE))
OVERSIZED = [
    ("streamable-http JSON body, no length", ("url", "/huge-json/mcp")),
    ("streamable-http JSON body, 10 GB Content-Length", ("url", "/huge-declared/mcp")),
    ("streamable-http SSE data line without end", ("url", "/endless-line/mcp")),
    ("streamable-http SSE event without end", ("url", "/endless-event/mcp")),
    ("HTTP+SSE event without end", ("url", "/sse-endless/sse")),
    ("OAuth resource metadata without end", ("url", "/oauth-huge/mcp")),
    ("stdio line without end", ("stdio", "huge-line")),
]


def target(misbehaving: str, how: tuple[str, str]) -> list[str]:
    kind, where = how
    if kind == "url":
        return ["--url", misbehaving + where]
    return ["--stdio", shlex.join([sys.executable, str(PEERS / "misbehaving_stdio.py"), where])]


@pytest.mark.parametrize("variant, how", OVERSIZED, ids=[v[0] for v in OVERSIZED])
def test_a_message_over_the_limit_is_exit_6(variant, how, misbehaving, isolated_dirs) -> None:
    proc = llmc("call", "echo", "message=hi", *target(misbehaving, how), "--timeout", "30", env=ENV, timeout=60)
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.count("\n") == 1 and "1 MiB limit" in proc.stderr and "LLMC_MAX_MESSAGE_BYTES" in proc.stderr


@pytest.mark.parametrize("how", [("url", "/ok/mcp"), ("stdio", "good")], ids=["http", "stdio"])
def test_messages_under_the_limit_pass(how, misbehaving, isolated_dirs) -> None:
    proc = llmc("call", "echo", "message=" + "y" * 1000, *target(misbehaving, how), env=ENV, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "y" * 1000


STREAM = b"data: a\r\ndata: b\rdata: c\n\nevent: x\r\ndata: \xc3\xa9\r\n\r\n: keep-alive\ndata: tail"


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, len(STREAM)])
def test_lines_split_the_same_at_any_chunk_boundary(chunk) -> None:
    """CRLF, CR and LF end lines (a CRLF split across chunks is one end), UTF-8 split across
    chunks decodes, and the last line needs no end."""
    from llmc_cli.mcp.transports.sse_parser import events, lines

    chunks = [STREAM[i : i + chunk] for i in range(0, len(STREAM), chunk)]
    assert list(lines(chunks, 100)) == [
        "data: a",
        "data: b",
        "data: c",
        "",
        "event: x",
        "data: é",
        "",
        ": keep-alive",
        "data: tail",
    ]
    assert [(e.event, e.data) for e in events(lines(chunks, 100), 100)] == [
        ("message", "a\nb\nc"),
        ("x", "é"),
        ("message", "tail"),
    ]

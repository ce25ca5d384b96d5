"""Server-sent events: the parser both HTTP transports read streams with.

Why not sseclient-py: it skips every event whose `data` is empty, and with it the event's `id`
and `retry`. The 2025-11-25 Streamable HTTP transport relies on exactly such an event (the
"priming" event: an id and a retry delay, no data) to make a stream resumable, so the parser here
follows the WHATWG algorithm instead: `id` and `retry` take effect whether or not data follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from llmc_cli.mcp.transports.base import too_large
from llmc_cli.model import dataclass

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class Event:
    event: str = "message"
    data: str = ""
    id: str | None = None  # the stream's last event id after this event (carried over)
    retry: int | None = None  # reconnection delay in ms, when this event set one


def lines(chunks: Iterable[bytes], limit: int) -> Iterator[str]:
    """The lines of a byte stream (ended by CRLF, LF or CR, as the SSE format allows), decoded
    as UTF-8; a line longer than `limit` bytes raises ProtocolError before it is all in memory."""
    buffer = bytearray()
    for chunk in chunks:
        scan_from = max(len(buffer) - 1, 0)  # only new bytes (and a CR left at the end) can end a line
        buffer += chunk
        start = 0
        while True:
            found = _LINE_END.search(buffer, max(start, scan_from))
            # A CR at the very end may be the first half of a CRLF: wait for the next chunk.
            if found is None or (found.group() == b"\r" and found.end() == len(buffer)):
                break
            yield buffer[start : found.start()].decode("utf-8", "replace")
            start = found.end()
        del buffer[:start]
        if len(buffer) > limit:
            raise too_large(limit, "an event-stream line")
    if buffer:
        yield bytes(buffer).removesuffix(b"\r").decode("utf-8", "replace")


def events(lines: Iterable[str], limit: int | None = None) -> Iterator[Event]:
    """Events of an SSE stream given its lines (without line endings). Events without data are
    yielded too (their `id`/`retry` matter); callers skip them for delivery. An event whose data
    grows past `limit` characters raises ProtocolError (one event is one message)."""
    last_id: str | None = None
    data: list[str] = []
    name, retry, seen, size = "", None, False, 0
    for line in lines:
        if not line:
            if seen:
                yield Event(name or "message", "\n".join(data), last_id, retry)
            name, data, retry, seen, size = "", [], None, False, 0
            continue
        if line.startswith(":"):
            continue  # comment (keep-alive)
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        seen = True
        if field == "data":
            data.append(value)
            size += len(value) + 1
            if limit is not None and size > limit:
                raise too_large(limit, "an event")
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value.isdigit():
            retry = int(value)
    if seen and data:  # a final event without its blank line: deliver what arrived
        yield Event(name or "message", "\n".join(data), last_id, retry)

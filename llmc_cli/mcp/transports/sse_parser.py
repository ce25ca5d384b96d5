"""Server-sent events: the parser both HTTP transports read streams with.

Why not sseclient-py: it skips every event whose `data` is empty, and with it the event's `id`
and `retry`. The 2025-11-25 Streamable HTTP transport relies on exactly such an event (the
"priming" event: an id and a retry delay, no data) to make a stream resumable, so the parser here
follows the WHATWG algorithm instead: `id` and `retry` take effect whether or not data follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator


@dataclass
class Event:
    event: str = "message"
    data: str = ""
    id: str | None = None  # the stream's last event id after this event (carried over)
    retry: int | None = None  # reconnection delay in ms, when this event set one


def events(lines: Iterable[str]) -> Iterator[Event]:
    """Events of an SSE stream given its lines (without line endings). Events without data are
    yielded too (their `id`/`retry` matter); callers skip them for delivery."""
    last_id: str | None = None
    name, data, retry, seen = "", [], None, False
    for line in lines:
        if not line:
            if seen:
                yield Event(name or "message", "\n".join(data), last_id, retry)
            name, data, retry, seen = "", [], None, False
            continue
        if line.startswith(":"):
            continue  # comment (keep-alive)
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        seen = True
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value.isdigit():
            retry = int(value)
    if seen and data:  # a final event without its blank line: deliver what arrived
        yield Event(name or "message", "\n".join(data), last_id, retry)

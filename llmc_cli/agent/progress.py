"""Progress events of an `ask` run as one line each for people (stderr)."""

from __future__ import annotations

from llmc_cli.model import JSONObject


def progress_line(event: JSONObject) -> str | None:
    """One line for people (stderr) per progress event, or None."""
    kind = event.get("event")
    if kind == "model":
        return f"[step {event['step']}] asking the model..."
    if kind == "tool_start":
        return f"[step {event['step']}] running {event['tool']}"
    if kind == "notice":
        return str(event.get("message") or "")
    if kind == "tool_end":
        took = f" ({event['durationMs']:.0f} ms)" if event.get("durationMs") is not None else ""
        told = f": {event['message']}" if event.get("message") else ""
        return f"[step {event['step']}] {event['tool']}: {event['outcome']}{took}{told}"
    return None

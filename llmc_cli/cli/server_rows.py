"""A profile's servers as `servers list|show` show them: the row of a server, and for the table
what it runs (long paths elided in the middle) and how (sandboxed, remote, in llmc)."""

from __future__ import annotations

import shlex
from typing import Any

from llmc_cli.config.profile_writer import server_table
from llmc_cli.config.secrets import shown_server


def _row(name: str, server: Any) -> dict[str, Any]:
    kind = "builtin" if server.builtin else "stdio" if server.command else "remote"
    return {"name": name, "kind": kind, "enabled": server.enabled, **_shown(server_table(server))}


def _shown(table: dict[str, Any]) -> dict[str, Any]:
    return shown_server(table)


def _launch_line(row: dict[str, Any]) -> str:
    """What a server runs, for a table: long paths elided in the middle (their start and their
    file name are what tell them apart)."""
    if row.get("command"):
        words = [row["command"], *row.get("args", [])]
        return " ".join(short if (short := _elided(w)) != w else shlex.quote(w) for w in words)
    return row.get("url") or f"builtin:{row.get('builtin')}"


def _elided(word: str, width: int = 36) -> str:
    """/work/wt/x/tests/node/node_modules/.bin/mcp-server-filesystem -> /work/…/mcp-server-filesystem:
    the start and the file name are what tell two long paths apart."""
    parts = word.split("/")
    if len(word) <= width or len(parts) < 4:
        return word
    return f"{'/'.join(parts[:2])}/…/{parts[-1]}"


def _runs(row: dict[str, Any]) -> str:
    """How a server runs, in a word or two (`servers show` says it whole)."""
    if row["kind"] != "stdio":
        return "in llmc" if row["kind"] == "builtin" else "remote"
    if row.get("sandbox") in (None, "none"):
        return "not sandboxed"
    return "sandboxed" + (", network" if row.get("network") else "")

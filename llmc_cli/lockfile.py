"""Tool-manifest pinning: a small JSON lock file, meant to be committed, that records per server
and tool a hash of what the model reads and what the tool accepts (name, description, input and
output schema, annotations), and the scan's verdict on that metadata (guard/scan.py tool_verdict,
handed in by the caller). A server that changes its tools silently — how tool poisoning arrives —
is drift: `tools diff` exits 10 (a changed verdict named as such), and a profile naming the lock
refuses drifted tools."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llmc_cli.config.files import write_atomic
from llmc_cli.errors import ConfigError, DriftError
from llmc_cli.model import Tool, canonical_json, parse_json

LOCK_VERSION = 1
Verdict = Callable[[Tool], list[str]]  # the scan's verdict on a tool's metadata ("severity:rule" each)
PINNED_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def tool_hash(tool: Tool) -> str:
    pinned = {k: tool.raw.get(k) for k in PINNED_FIELDS if k in tool.raw}
    return "sha256:" + hashlib.sha256(canonical_json(pinned).encode("utf-8")).hexdigest()


def build(tools: list[Tool], server_info: dict[str, Mapping[str, object]], verdict: Verdict | None = None) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    for name, info in server_info.items():
        servers[name] = {"serverInfo": {k: info.get(k) for k in ("name", "version") if k in info}, "tools": {}}
    for tool in tools:
        servers.setdefault(tool.server, {"serverInfo": {}, "tools": {}})["tools"][tool.name] = {
            "hash": tool_hash(tool),
            "description": tool.description,
            **({"scan": verdict(tool)} if verdict else {}),
        }
    return {"version": LOCK_VERSION, "servers": servers}


def write(path: str | Path, lock: Mapping[str, object]) -> None:
    """Write a lock file (or an exported manifest) atomically, with the mode any file the user
    creates gets: it is meant to be shared and committed."""
    text = json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_atomic(Path(path), text, mode=None, follow_link=True)


def read(path: str | Path) -> dict[str, Any]:
    try:
        data = parse_json(Path(path).read_text(encoding="utf-8"), max_depth=None)
    except FileNotFoundError:
        raise ConfigError(f"lock file not found: {path}") from None
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON
        raise ConfigError(f"cannot read lock file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION or not isinstance(data.get("servers"), dict):
        raise ConfigError(f"{path}: not an llmc lock file (version {LOCK_VERSION})")
    return data


def diff(lock: dict[str, Any], tools: list[Tool], servers: list[str], verdict: Verdict | None = None) -> dict[str, Any]:
    """What was added, removed or changed, for the servers that were listed; a tool whose scan
    verdict differs from the pinned one is changed, its change naming both verdicts."""
    current = {(t.server, t.name): t for t in tools}
    added, removed, changed = [], [], []
    for server in servers:
        pinned = (lock["servers"].get(server) or {}).get("tools") or {}
        for name, entry in pinned.items():
            tool = current.get((server, name))
            if tool is None:
                removed.append({"server": server, "tool": name})
                continue
            scan = scan_change(entry, tool, verdict)
            if tool_hash(tool) != entry.get("hash") or scan:
                change: dict[str, Any] = {"server": server, "tool": name}
                if tool.description != entry.get("description"):
                    change["description"] = {"old": entry.get("description"), "new": tool.description}
                if scan:
                    change["scan"] = scan
                changed.append(change)
        added += [{"server": server, "tool": name} for (s, name) in current if s == server and name not in pinned]
    return {"drift": bool(added or removed or changed), "added": added, "removed": removed, "changed": changed}


def scan_change(entry: Mapping[str, Any], tool: Tool, verdict: Verdict | None) -> dict[str, list[str]] | None:
    """{old, new} when the pinned scan verdict (locks written before it have none) differs."""
    if verdict is None or not isinstance(entry.get("scan"), list):
        return None
    new = verdict(tool)
    return {"old": entry["scan"], "new": new} if new != entry["scan"] else None


def _said(rules: list[str]) -> str:
    return ", ".join(r.replace(":", " ", 1) for r in rules) or "clean"


def check(lock_path: str | Path, tool: Tool, verdict: Verdict | None = None) -> None:
    """Refuse a tool that is not pinned as it is now (DriftError, exit 10), saying when the
    scan's verdict on its metadata changed too."""
    entry = ((read(lock_path)["servers"].get(tool.server) or {}).get("tools") or {}).get(tool.name)
    if entry is None:
        raise DriftError(f"{tool.qualified_name} is not in the lock file {lock_path}: review it, then `llmc tools lock`")
    if entry.get("hash") != tool_hash(tool):
        scan = scan_change(entry, tool, verdict)
        verdict_said = f"; the scan's verdict changed: {_said(scan['new'])} (was: {_said(scan['old'])})" if scan else ""
        raise DriftError(
            f"{tool.qualified_name} changed since it was locked in {lock_path} "
            f"(description, schema or annotations){verdict_said}: review with `llmc tools diff`"
        )

"""Tool names each provider accepts, sanitised deterministically and without collisions, with a
reverse map so a provider's tool call routes back to the exact `server.tool`."""

from __future__ import annotations

import hashlib
import re
from typing import Iterator, Mapping

RULES = {  # provider -> (allowed pattern, character class to keep, max length)
    "openai": (re.compile(r"^[a-zA-Z0-9_-]{1,64}$"), r"[^a-zA-Z0-9_-]", 64),
    "anthropic": (re.compile(r"^[a-zA-Z0-9_-]{1,64}$"), r"[^a-zA-Z0-9_-]", 64),
    "gemini": (re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$"), r"[^a-zA-Z0-9_.:-]", 128),
}
PROPERTY_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")  # Gemini property names


def legal(name: str, dialect: str) -> bool:
    return bool(RULES[dialect][0].match(name))


def sanitise(name: str, dialect: str) -> str:
    """Replace what the dialect forbids; shorten with a hash suffix that keeps names distinct."""
    _, forbidden, limit = RULES[dialect]
    clean = re.sub(forbidden, "_", name) or "_"
    if dialect == "gemini" and not re.match(r"[a-zA-Z_]", clean):
        clean = "_" + clean
    if len(clean) > limit:
        clean = clean[: limit - 9] + "_" + _digest(name)
    return clean


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


class NameMap(Mapping[str, tuple[str, str]]):
    """provider name -> (server, tool); `provider_name(server, tool)` goes the other way."""

    def __init__(self) -> None:
        self._to_owner: dict[str, tuple[str, str]] = {}
        self._to_name: dict[tuple[str, str], str] = {}

    def add(self, name: str, server: str, tool: str) -> None:
        self._to_owner[name] = (server, tool)
        self._to_name[(server, tool)] = name

    def provider_name(self, server: str, tool: str) -> str:
        return self._to_name[(server, tool)]

    def __getitem__(self, name: str) -> tuple[str, str]:
        return self._to_owner[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._to_owner)

    def __len__(self) -> int:
        return len(self._to_owner)


def assign(owners: list[tuple[str, str]], dialect: str | None) -> tuple[NameMap, list[tuple[str, str, str]]]:
    """Provider names for (server, tool) pairs. With one server, names stay as the server named
    them when legal; with several, `server_tool`. Returns the map and (server, tool, why) for
    every name that had to change."""
    names = NameMap()
    changed: list[tuple[str, str, str]] = []
    several = len({server for server, _ in owners}) > 1
    taken: set[str] = set()
    for server, tool in owners:
        wanted = f"{server}_{tool}" if several else tool
        name = wanted if dialect is None or legal(wanted, dialect) else sanitise(wanted, dialect)
        if name in taken:  # collision after sanitising: a stable suffix from the original name
            name = sanitise(f"{name[:50]}_{_digest(server + '.' + tool)}", dialect or "gemini")
        taken.add(name)
        names.add(name, server, tool)
        if name != wanted:
            changed.append((server, tool, f"renamed to {name!r}: {dialect} tool names must match {RULES[dialect][0].pattern}"))
    return names, changed

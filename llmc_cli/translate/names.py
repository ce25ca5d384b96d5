"""Tool and property names each provider accepts, sanitised deterministically and without
collisions, with a reverse map so a provider's tool call routes back to the exact `server.tool`.

Sanitising replaces forbidden characters by `_`; a name that is too long, or that collides with
another after sanitising, gets `_` + a short hash of the original (server, tool) pair, so the
result depends only on the names themselves, never on the order the servers listed them.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType

from llmc_cli.model import dataclass

from .findings import Finding


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    forbidden: re.Pattern[str]  # one character the rule does not allow
    limit: int
    first: re.Pattern[str] | None = None  # what the first character must match, if anything

    def legal(self, name: str) -> bool:
        return bool(self.pattern.match(name))

    def sanitise(self, name: str, key: str | None = None) -> str:
        """`name` made legal; `key` (default: the name) seeds the hash suffix of a shortened name."""
        clean = self.forbidden.sub("_", name) or "_"
        if self.first and not self.first.match(clean):
            clean = "_" + clean
        if len(clean) > self.limit:
            clean = with_suffix(clean, key or name, self.limit)
        return clean


def _rule(chars: str, limit: int, first: str | None = None) -> Rule:
    head = f"[{first}]" if first else ""
    body = f"[{chars}]{{{0 if first else 1},{limit - 1 if first else limit}}}"
    return Rule(re.compile(f"^{head}{body}$"), re.compile(f"[^{chars}]"), limit, re.compile(f"[{first}]") if first else None)


RULES: dict[str, Rule] = {
    # OpenAI; Anthropic documents the same (its live API has been seen allowing 128: use 64).
    "openai": _rule("a-zA-Z0-9_-", 64),
    "anthropic": _rule("a-zA-Z0-9_-", 64),
    # google-genai: start with a letter or _, then letters, digits, _ . : -, at most 128.
    "gemini": _rule("a-zA-Z0-9_.:-", 128, "a-zA-Z_"),
    # Older Vertex/Gemini SDKs document 64 characters and no colon.
    "gemini-legacy": _rule("a-zA-Z0-9_.-", 64, "a-zA-Z_"),
    # The text protocol reads `name: X` up to whitespace or a quote.
    "text": Rule(re.compile(r"^[^\s\"'`<>]{1,128}$"), re.compile(r"[\s\"'`<>]"), 128),
}
# Gemini property names (both gemini formats): letters, digits, _, not starting with a digit.
PROPERTY = _rule("a-zA-Z0-9_", 64, "a-zA-Z_")


def digest(text: str, size: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


def with_suffix(name: str, key: str, limit: int | None, size: int = 8) -> str:
    suffix = "_" + digest(key, size)
    return (name[: limit - len(suffix)] if limit else name) + suffix


class NameMap(Mapping[str, tuple[str, str]]):
    """provider name -> (server, tool); `provider_name(server, tool)` goes the other way."""

    def __init__(self, pairs: Iterable[tuple[str, tuple[str, str]]] = ()) -> None:
        self._owner: dict[str, tuple[str, str]] = {}
        self._name: dict[tuple[str, str], str] = {}
        for name, owner in pairs:
            self._owner[name] = owner
            self._name[owner] = name

    def provider_name(self, server: str, tool: str) -> str:
        return self._name[(server, tool)]

    def __getitem__(self, name: str) -> tuple[str, str]:
        return self._owner[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def __repr__(self) -> str:
        return f"NameMap({self._owner!r})"


def assign(
    owners: list[tuple[str, str]], rules: str | None, target: str, wanted_names: Mapping[tuple[str, str], str] | None = None
) -> tuple[NameMap, list[Finding]]:
    """Provider names for distinct (server, tool) pairs under RULES[rules] (None: any name).

    With one server a tool keeps the name the server gave it when legal; with several, names are
    `server_tool`; `wanted_names` chooses them instead (a set of tools that grows during a run
    keeps each name it gave). Every name that had to change is reported."""
    rule = RULES.get(rules) if rules else None
    several = len({server for server, _ in owners}) > 1
    wanted = {o: (wanted_names or {}).get(o) or (f"{o[0]}_{o[1]}" if several else o[1]) for o in owners}
    names = {o: w if rule is None or rule.legal(w) else rule.sanitise(w, f"{o[0]}\x00{o[1]}") for o, w in wanted.items()}
    for size in (8, 16, 64):  # a hash suffix that still collides is astronomically rare; widen it
        counts = Counter(names.values())
        clashing = [o for o, n in names.items() if counts[n] > 1]
        if not clashing:
            break
        untouched = Counter(names[o] for o in clashing if names[o] == wanted[o])
        for o in clashing:  # the one name the server really chose keeps it; the others move
            if names[o] != wanted[o] or untouched[names[o]] > 1:
                names[o] = with_suffix(names[o], f"{o[0]}\x00{o[1]}", rule.limit if rule else None, size)
    findings = []
    for o, name in names.items():
        if name != wanted[o]:
            why = (
                f"{target} tool names must match {rule.pattern.pattern}"
                if rule and not rule.legal(wanted[o])
                else "another tool has the same name after sanitising or namespacing"
            )
            findings.append(Finding(f"{o[0]}.{o[1]}", "$.name", f"renamed {wanted[o]!r} to {name!r}", why, target))
    return NameMap((n, o) for o, n in names.items()), findings


def property_names(names: Iterable[str]) -> Mapping[str, str]:
    """Gemini-legal names for the properties of one object: {original: new}, distinct.

    Legal names keep themselves; the others are sanitised, with a hash suffix on a clash. The
    result depends only on the set of names, so mapping arguments back recomputes it."""
    return _property_names(tuple(names))


@lru_cache(maxsize=1024)  # tools of one server, and each call's arguments, repeat the same names
def _property_names(names: tuple[str, ...]) -> Mapping[str, str]:
    out = {n: n for n in names if PROPERTY.legal(n)}
    taken = set(out)
    for name in sorted(n for n in names if n not in out):
        new = PROPERTY.sanitise(name)
        if new in taken:
            new = with_suffix(new, name, PROPERTY.limit)
        out[name] = new
        taken.add(new)
    return MappingProxyType(out)  # shared by every caller with the same names: read-only

"""Tool search: which of a profile's tools fit a request in words, ranked offline (no model, no
network) so a big toolbox can be searched instead of sent whole to a model.

The ranking is BM25F: each tool is one document of weighted fields (its name split into words,
its server's name, title, description, argument names and argument descriptions); a word in the
name counts more than one in the description. Words are lower-cased, split at snake_case,
camelCase, kebab-case and dots, stripped of common English endings, and a query word also
matches a few usual synonyms (add ~ sum, create ~ new, ...) at a lower weight.

Which tools are searched is the caller's business; `searchable_tools` gives the ones a profile
may see: the policy's visible tools, less any that drifted from the profile's lock file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmc_cli import lockfile
from llmc_cli.model import JSONObject, Tool
from llmc_cli.services.calls import lock_path
from llmc_cli.services.catalogs import visible_tools

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile

# Field weights: how much one occurrence of a word counts in each field.
WEIGHTS = {"name": 3.0, "server": 1.5, "title": 2.0, "description": 1.0, "args": 1.5, "argdocs": 0.5}
K1 = 1.2
B = 0.75
SYNONYM_WEIGHT = 0.4  # a synonym of a query word counts this much of the word itself
MAX_QUERY_WORDS = 64  # a query is a request in words, not a document
MAX_ARGUMENTS = 64  # arguments read per tool (a schema can be any size)

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "for",
        "in",
        "on",
        "and",
        "or",
        "with",
        "from",
        "by",
        "is",
        "are",
        "be",
        "as",
        "at",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "my",
        "me",
        "i",
        "we",
        "you",
        "your",
        "our",
        "can",
        "could",
        "would",
        "should",
        "will",
        "please",
        "want",
        "need",
        "some",
        "any",
        "all",
        "using",
        "use",
        "via",
        "into",
    ]
)

# Words people use for the same action or thing. Each group is symmetric.
SYNONYM_GROUPS = (
    "add sum plus total",
    "create new make add insert",
    "delete remove erase destroy drop",
    "find search query lookup look locate",
    "get fetch read retrieve obtain show",
    "list enumerate ls",
    "update edit modify change patch set",
    "write save store put",
    "run execute exec invoke start launch",
    "stop kill terminate cancel",
    "file document doc",
    "directory folder dir",
    "move rename mv",
    "copy duplicate cp",
    "send post",
    "message msg",
    "issue ticket bug",
    "repository repo",
    "image picture photo",
    "compress zip gzip",
    "environment env",
    "number numeric integer",
    "schedule book create",
    "meeting event appointment",
    "customer client contact",
    "download get fetch",
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z0-9]+")


def stem(word: str) -> str:
    """A light English stemmer: enough that "files" finds "file" and "creating" finds "create"."""
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, replacement, minimum in (
        ("ies", "y", 5),
        ("sses", "ss", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("es", "", 6),
        ("s", "", 4),
    ):
        if word.endswith(suffix) and len(word) >= minimum:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            word = word[: len(word) - len(suffix)] + replacement
            break
    return word.rstrip("e") if len(word) > 4 else word


def words(text: str) -> list[str]:
    """The stemmed words of a text or an identifier, stop words dropped."""
    out = []
    for chunk in _WORD.findall(_CAMEL.sub(" ", text)):
        lower = chunk.lower()
        if lower not in STOP_WORDS:
            out.append(stem(lower))
    return out


def _synonyms() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group.split()}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return table


SYNONYMS = _synonyms()


def _fields(tool: Tool) -> dict[str, list[str]]:
    props = tool.input_schema.get("properties") if isinstance(tool.input_schema, dict) else None
    args: list[str] = []
    docs: list[str] = []
    if isinstance(props, dict):
        for name, schema in list(props.items())[:MAX_ARGUMENTS]:
            args += words(str(name))
            if isinstance(schema, dict) and isinstance(doc := schema.get("description"), str):
                docs += words(doc)
    return {
        "name": words(tool.name),
        "server": words(tool.server),
        "title": words(tool.title or ""),
        "description": words(tool.description or ""),
        "args": args,
        "argdocs": docs,
    }


@dataclass(frozen=True)
class Match:
    tool: Tool
    score: float

    def to_json(self) -> JSONObject:
        """One row of `tools search` (and of the search tools a model or a host calls)."""
        return {
            "score": round(self.score, 4),
            "server": self.tool.server,
            "tool": self.tool.name,
            "title": self.tool.title,
            "description": self.tool.description,
        }


class ToolIndex:
    """An inverted index over tools: built once (linear in their text), searched many times
    (linear in the postings of the query's words)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: list[Tool] = list(tools)
        self._postings: dict[str, list[tuple[int, float]]] = {}
        lengths = []
        for i, tool in enumerate(self.tools):
            weighted: dict[str, float] = {}
            length = 0.0
            for field, found in _fields(tool).items():
                weight = WEIGHTS[field]
                for word in found:
                    weighted[word] = weighted.get(word, 0.0) + weight
                length += weight * len(found)
            lengths.append(length)
            for word, tf in weighted.items():
                self._postings.setdefault(word, []).append((i, tf))
        self._lengths = lengths
        self._average = (sum(lengths) / len(lengths)) if lengths else 1.0
        count = len(self.tools)
        self._idf = {w: math.log(1.0 + (count - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self._postings.items()}

    def search(self, query: str, limit: int = 5, servers: Sequence[str] | None = None) -> list[Match]:
        """The best `limit` tools for `query` (only those of `servers`, when given), best first;
        a tool that shares no word with the query is never returned. Ties keep listing order."""
        terms: dict[str, float] = {}
        for word in words(query)[:MAX_QUERY_WORDS]:
            terms[word] = max(terms.get(word, 0.0), 1.0)
            for synonym in SYNONYMS.get(word, ()):
                terms[synonym] = max(terms.get(synonym, 0.0), SYNONYM_WEIGHT)
        scores: dict[int, float] = {}
        average = self._average or 1.0
        for word, boost in terms.items():
            postings = self._postings.get(word)
            if not postings:
                continue
            idf = self._idf[word] * boost
            for i, tf in postings:
                norm = K1 * (1.0 - B + B * self._lengths[i] / average)
                scores[i] = scores.get(i, 0.0) + idf * tf * (K1 + 1.0) / (tf + norm)
        wanted = set(servers) if servers else None
        ranked = sorted((i for i in scores if wanted is None or self.tools[i].server in wanted), key=lambda i: (-scores[i], i))
        return [Match(self.tools[i], scores[i]) for i in ranked[: max(limit, 0)]]


def not_drifted(tools: list[Tool], profile: LoadedProfile) -> list[Tool]:
    """The tools a call would not refuse as drifted: all of them without a lock file in the
    profile; with one, only those pinned as they are now (the check `call_tool` makes)."""
    if not profile.profile.lock:
        return tools

    servers = lockfile.read(lock_path(profile))["servers"]
    return [
        t
        for t in tools
        if ((servers.get(t.server) or {}).get("tools") or {}).get(t.name, {}).get("hash") == lockfile.tool_hash(t)
    ]


def searchable_tools(catalog: Catalog, profile: LoadedProfile, servers: list[str] | None = None) -> tuple[list[Tool], list[Any]]:
    """(tools, failures): the tools of the profile a search may return: those its policy lets
    a model see, less the drifted ones; and the servers that could not be listed."""

    allowed, _denied, failures = visible_tools(catalog, profile, servers)
    return not_drifted(allowed, profile), failures

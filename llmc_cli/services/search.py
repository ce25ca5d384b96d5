"""Tool search: which of a profile's tools fit a request in words, ranked offline (no model, no
network) so a big toolbox can be searched instead of sent whole to a model.

The ranking is BM25F: each tool is one document of weighted fields (its name split into words,
its server's name, title, description, argument names and docs at any depth of its input schema,
and the allowed values of its arguments); a word in the name counts more than one in the
description. Words come from services/search_text.py (a Unicode tokenizer, case-folded and
accent-free, CJK as character pairs, a light English stemmer); a query drops question words,
bare numbers and times, and each of its words also matches a few usual synonyms (add ~ sum,
create ~ new, ...) at a lower weight. Text that most tools of one server share in their
descriptions ("This tool belongs to the vehicle control system, ...") is counted down, so it
does not blur which of that server's tools fits. `search(..., explain=True)` says why each tool
ranked.

Which tools are searched is the caller's business; `searchable_tools` gives the ones a profile
may see: the policy's visible tools, less any that drifted from the profile's lock file.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from llmc_cli import lockfile
from llmc_cli.config.profiles import lock_path
from llmc_cli.model import JSON, JSONObject, Tool, dataclass
from llmc_cli.services.catalogs import visible_tools
from llmc_cli.services.search_text import query_words, schema_text, stem, words

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile

# Field weights: how much one occurrence of a word counts in each field.
WEIGHTS = {
    "name": 3.0,
    "server": 1.5,
    "title": 2.0,
    "description": 1.0,
    "args": 1.5,
    "argdocs": 0.5,
    "values": 1.0,
}
K1 = 1.2
B = 0.75
SYNONYM_WEIGHT = 0.4  # a synonym of a query word counts this much of the word itself
MAX_QUERY_WORDS = 64  # a query is a request in words, not a document
# Server boilerplate: a word in the descriptions of at least BOILERPLATE_SHARE of a server's tools
# (with BOILERPLATE_MIN_TOOLS or more) tells its tools apart from no other of them; it counts
# (1 - share) of itself there, at least BOILERPLATE_FLOOR.
BOILERPLATE_SHARE = 0.5
BOILERPLATE_MIN_TOOLS = 3
BOILERPLATE_FLOOR = 0.1
BOILERPLATE_FIELDS = ("description",)

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


def _synonyms() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group.split()}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return table


SYNONYMS = _synonyms()


def _fields(tool: Tool) -> dict[str, list[str]]:
    args, docs, values = schema_text(tool.input_schema)
    return {
        "name": words(tool.name),
        "server": words(tool.server),
        "title": words(tool.title or ""),
        "description": words(tool.description or ""),
        "args": args,
        "argdocs": docs,
        "values": values,
    }


def _boilerplate(tools: list[Tool], fields: list[dict[str, list[str]]]) -> dict[str, dict[str, float]]:
    """Per server, the words its tools share (see BOILERPLATE_SHARE) and the factor each counts."""
    by_server: dict[str, list[int]] = {}
    for i, tool in enumerate(tools):
        by_server.setdefault(tool.server, []).append(i)
    shared: dict[str, dict[str, float]] = {}
    for server, members in by_server.items():
        if len(members) < BOILERPLATE_MIN_TOOLS:
            continue
        counts: dict[str, int] = {}
        for i in members:
            for word in {w for f in BOILERPLATE_FIELDS for w in fields[i][f]}:
                counts[word] = counts.get(word, 0) + 1
        factors = {}
        for word, count in counts.items():
            share = count / len(members)
            if share >= BOILERPLATE_SHARE:
                factors[word] = max(BOILERPLATE_FLOOR, 1.0 - share)
        if factors:
            shared[server] = factors
    return shared


def _weighted(found: dict[str, list[str]], shared: dict[str, float]) -> dict[str, dict[str, float]]:
    """word -> field -> weighted count, for one tool."""
    out: dict[str, dict[str, float]] = {}
    for field, found_words in found.items():
        weight = WEIGHTS[field]
        damp = field in BOILERPLATE_FIELDS
        for word in found_words:
            w = weight * (shared.get(word, 1.0) if damp else 1.0)
            per = out.setdefault(word, {})
            per[field] = per.get(field, 0.0) + w
    return out


@dataclass(frozen=True)
class Match:
    tool: Tool
    score: float
    # Why it ranked (`ToolIndex.search(..., explain=True)`): the terms it matched, per field.
    why: JSONObject | None = None

    def to_json(self) -> JSONObject:
        """One row of `tools search` (and of the search tools a model or a host calls)."""
        row: JSONObject = {
            "score": round(self.score, 4),
            "server": self.tool.server,
            "tool": self.tool.name,
            "title": self.tool.title,
            "description": self.tool.description,
        }
        if self.why is not None:
            row["why"] = self.why
        return row


class ToolIndex:
    """An inverted index over tools: built once (linear in their text), searched many times
    (linear in the postings of the query's words)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: list[Tool] = list(tools)
        self._postings: dict[str, list[tuple[int, float]]] = {}
        fields = [_fields(tool) for tool in self.tools]
        self._shared = _boilerplate(self.tools, fields)
        lengths = []
        for i, (tool, found) in enumerate(zip(self.tools, fields, strict=False)):
            weighted = _weighted(found, self._shared.get(tool.server, {}))
            lengths.append(sum(sum(per.values()) for per in weighted.values()))
            for word, per in weighted.items():
                self._postings.setdefault(word, []).append((i, sum(per.values())))
        self._lengths = lengths
        self._average = (sum(lengths) / len(lengths)) if lengths else 1.0
        average = self._average or 1.0
        self._norms = [K1 * (1.0 - B + B * length / average) for length in lengths]
        count = len(self.tools)
        self._idf = {w: math.log(1.0 + (count - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self._postings.items()}

    def terms(self, query: str) -> dict[str, tuple[str, float]]:
        """The weighted terms a query searches: term -> (the query word it came from, boost)."""
        terms: dict[str, tuple[str, float]] = {}
        for word in query_words(query)[:MAX_QUERY_WORDS]:
            terms[word] = (word, 1.0)
            for synonym in SYNONYMS.get(word, ()):
                if terms.get(synonym, ("", 0.0))[1] < SYNONYM_WEIGHT:
                    terms[synonym] = (word, SYNONYM_WEIGHT)
        return terms

    def _term_score(self, word: str, boost: float, i: int, tf: float) -> float:
        return self._idf[word] * boost * tf * (K1 + 1.0) / (tf + self._norms[i])

    def search(self, query: str, limit: int = 5, servers: Sequence[str] | None = None, explain: bool = False) -> list[Match]:
        """The best `limit` tools for `query` (only those of `servers`, when given), best first;
        a tool that shares no word with the query is never returned. Ties keep listing order.
        With `explain`, each match says why (`Match.why`)."""
        terms = self.terms(query)
        scores: dict[int, float] = {}
        norms, k1 = self._norms, K1 + 1.0
        for word, (_source, boost) in terms.items():
            postings = self._postings.get(word)
            if not postings:
                continue
            idf = self._idf[word] * boost * k1
            for i, tf in postings:  # the hot loop: inline, no call per posting
                scores[i] = scores.get(i, 0.0) + idf * tf / (tf + norms[i])
        wanted = set(servers) if servers else None
        found = scores if wanted is None else [i for i in scores if self.tools[i].server in wanted]
        top = heapq.nsmallest(max(limit, 0), found, key=lambda i: (-scores[i], i))
        if explain:
            return [Match(self.tools[i], scores[i], self._why(i, terms)) for i in top]
        return [Match(self.tools[i], scores[i]) for i in top]

    def _why(self, i: int, terms: dict[str, tuple[str, float]]) -> JSONObject:
        """What tool `i` matched: each term's score split over the fields it was found in (by
        their share of its weighted count), the query word it stands for (itself or a synonym)
        and its idf; and the words the tool's server shares (counted down as boilerplate)."""
        tool = self.tools[i]
        shared = self._shared.get(tool.server, {})
        weighted = _weighted(_fields(tool), shared)
        matched: list[tuple[float, JSONObject]] = []
        for word, (source, boost) in terms.items():
            per = weighted.get(word)
            if not per:
                continue
            tf = sum(per.values())
            score = self._term_score(word, boost, i, tf)
            entry: JSONObject = {
                "term": word,
                "query_word": source,
                "synonym": source != word,
                "score": round(score, 4),
                "idf": round(self._idf[word], 4),
                "fields": {f: round(score * w / tf, 4) for f, w in sorted(per.items(), key=lambda kv: -kv[1])},
            }
            if word in shared:
                entry["boilerplate"] = round(shared[word], 4)
            matched.append((score, entry))
        matched.sort(key=lambda pair: -pair[0])
        terms_json: list[JSON] = [entry for _score, entry in matched]
        return {"terms": terms_json, "length": round(self._lengths[i] / (self._average or 1.0), 4)}


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


def searchable_tools(
    catalog: Catalog, profile: LoadedProfile, servers: list[str] | None = None, clearance: str | None = None
) -> tuple[list[Tool], list[Any]]:
    """(tools, failures): the tools of the profile a search may return: those its policy lets
    a model see, less the drifted ones; and the servers that could not be listed."""

    allowed, _denied, failures = visible_tools(catalog, profile, servers, clearance)
    return not_drifted(allowed, profile), failures

"""The words of tool search (services/search.py): a Unicode tokenizer, a light English stemmer,
the words a query drops, and the text a tool's input schema carries.

Tokens are runs of letters and digits in any script, case-folded (Zürich and ZÜRICH are one
word) and stripped of accents (café finds cafe); identifiers are split at snake_case,
camelCase, kebab-case and dots. Chinese, Japanese and Korean text has no spaces between words,
so a run of those scripts is indexed as its overlapping character pairs (检索工具 -> 检索 索工
工具), which finds a word inside a longer run without a dictionary.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

MAX_SCHEMA_NODES = 256  # schema nodes read per tool (a schema can be any size)
MAX_VALUES = 64  # allowed values read per argument

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
# Words a request is phrased with that say nothing about which tool answers it: question words,
# auxiliaries, politeness. Dropped from queries only (a tool named `tell_joke` keeps its words).
QUERY_NOISE = frozenset(
    [
        "what",
        "whats",
        "how",
        "much",
        "many",
        "was",
        "were",
        "did",
        "does",
        "do",
        "done",
        "doing",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "there",
        "here",
        "have",
        "has",
        "had",
        "give",
        "tell",
        "let",
        "know",
        "like",
        "just",
        "also",
        "then",
        "than",
        "so",
        "if",
        "hi",
        "hello",
        "hey",
        "thanks",
        "thank",
        "kindly",
        "help",
        "assist",
        "am",
        "been",
        "being",
        "get",
    ]
)
# Bare numbers and times in a query ("10", "2024", "4pm", "3rd", "10k") match tools that happen to
# have digits in their names; the values of a request are not what picks its tool.
_NUMBERISH = re.compile(r"\d+(?:st|nd|rd|th|am|pm|s|k|m)?")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TOKEN = re.compile(r"[^\W_]+")
# Han, Hiragana, Katakana, Hangul (syllables and jamo) and the CJK compatibility ideographs.
_CJK = re.compile(r"([\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)")


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


def _fold(chunk: str) -> str:
    """Case-folded, accents stripped (NFKD less the combining marks)."""
    folded = unicodedata.normalize("NFKD", chunk.casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))


def _pieces(chunk: str) -> Iterator[str]:
    """A token outside ASCII: its CJK runs as character pairs, the rest as words."""
    for i, part in enumerate(_CJK.split(chunk)):
        if not part:
            continue
        if i % 2:  # a CJK run
            if len(part) == 1:
                yield part
            else:
                yield from (part[j : j + 2] for j in range(len(part) - 1))
        else:
            folded = _fold(part)
            yield stem(folded) if folded.isascii() else folded


@lru_cache(maxsize=65536)
def _token_words(chunk: str) -> tuple[str, ...]:
    """The words of one token (most recur: a cache saves the stemming)."""
    if chunk.isascii():
        lower = chunk.lower()
        return () if lower in STOP_WORDS else (stem(lower),)
    return tuple(p for p in _pieces(chunk) if p not in STOP_WORDS)


def words(text: str) -> list[str]:
    """The stemmed words of a text or an identifier, stop words dropped."""
    out: list[str] = []
    for chunk in _TOKEN.findall(_CAMEL.sub(" ", text)):
        out += _token_words(chunk)
    return out


def query_words(text: str) -> list[str]:
    """The words of a request that can pick a tool: `words` less question words and the like,
    and less bare numbers and times. A query of nothing else keeps them (it means them)."""
    kept: list[str] = []
    everything: list[str] = []
    for chunk in _TOKEN.findall(_CAMEL.sub(" ", text)):
        found = _token_words(chunk)
        everything += found
        lower = chunk.lower()
        if lower in QUERY_NOISE or _NUMBERISH.fullmatch(lower):
            continue
        kept += found
    return kept or everything


def schema_text(schema: Any) -> tuple[list[str], list[str], list[str]]:
    """(argument names, argument docs, allowed values) of an input schema, nested ones included:
    properties at any depth, array items, anyOf/oneOf/allOf branches, $defs; descriptions and
    titles; enum and const values that are text. The root's own description and title are the
    tool's business, not read here."""
    names: list[str] = []
    docs: list[str] = []
    values: list[str] = []
    stack: list[tuple[Any, bool]] = [(schema, True)]
    seen = 0
    while stack and seen < MAX_SCHEMA_NODES:
        node, root = stack.pop()
        if not isinstance(node, dict):
            continue
        seen += 1
        if not root:
            for key in ("description", "title"):
                if isinstance(text := node.get(key), str):
                    docs += words(text)
        allowed = node.get("enum")
        allowed = allowed if isinstance(allowed, list) else [node["const"]] if "const" in node else []
        for value in allowed[:MAX_VALUES]:
            if isinstance(value, str):
                values += words(value)
        children: list[Any] = []
        props = node.get("properties")
        if isinstance(props, dict):
            for name, sub in props.items():
                names += words(str(name))
                children.append(sub)
        for key in ("items", "additionalProperties", "not"):
            children.append(node.get(key))
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(branches := node.get(key), list):
                children += branches
        for key in ("$defs", "definitions"):
            if isinstance(defs := node.get(key), dict):
                children += defs.values()
        stack.extend((child, False) for child in reversed(children) if isinstance(child, dict))
    return names, docs, values

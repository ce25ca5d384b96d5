"""The text rules of the metadata and result scan (guard/scan.py text_findings), each with a
cheap, exact pre-check, so that the expensive patterns run only on text they can match.

A model-instruction rule carries anchors: groups of lowercase literals read off its pattern, such
that every match of the pattern contains one literal of every group. `folded` lowercases a text so
that wherever a literal matches under re.IGNORECASE, its lowercase is a substring of the folded
text (Python's `re` also lets U+0130, U+0131, U+017F and U+212A match ASCII letters: they are mapped
first; tests/guard/test_scan_fast.py checks every code point). A rule whose anchors are not all
present cannot match and is skipped; otherwise the full pattern runs on the whole text, so a
finding is the same as without the pre-check. The blob and padding rules are gated the same way
on runs of their characters in the text's UTF-8 bytes (their alphabets are ASCII, so a run in the
text is a run in its bytes)."""

from __future__ import annotations

import re

HIGH, MEDIUM = "high", "medium"

INVISIBLE = re.compile("[\U000e0000-\U000e007f\u200b-\u200f\u2060-\u2064\ufeff\u202a-\u202e\u2066-\u2069\u180e\u00ad]")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Padding, `(?:\n[ \t]*){12,}|[ \t\u00a0]{120,}`, as its two alternatives (their first characters
# differ, so the earlier of the two matches is the combined pattern's match).
PAD_LINES = re.compile(r"(?:\n[ \t]*){12,}")
PAD_BLANKS = re.compile(r"[ \t\u00a0]{120,}")

_SENSITIVE_PATH = (
    r"(?:~/?\.ssh|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.ssh/|/etc/(?:passwd|shadow)|\.aws/credentials|\.env\b|"
    r"\bmcp\.json\b|\.cursor/|claude_desktop_config|\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.kube/config|"
    r"\bcredentials?\s+file|\bprivate\s+keys?\b|\bkeychain\b|\bwallet\b|\bcookies?\s+(?:file|db|database)\b)"
)
_SENSITIVE_ANCHORS = (
    "ssh", "id_", "/etc/", "credential", ".env", "mcp.json", ".cursor/", "claude_desktop_config", ".netrc",
    ".npmrc", ".pypirc", ".kube/config", "private", "keychain", "wallet", "cookie",
)  # fmt: skip
# What a model must never hand a tool: the user's secrets and the conversation. A bare "token" or
# "password" is a tool's own business (a pagination token, a new password) unless it is the user's.
_SECRET_NOUN = (
    r"(?:api[\s_-]?keys?|access[\s_-]?tokens?|auth(?:entication)?[\s_-]?tokens?|bearer[\s_-]?tokens?|"
    r"ssh[\s_-]?keys?|private[\s_-]?keys?|env(?:ironment)?\s+variables?|conversation(?:\s+history)?|"
    r"chat\s+history|previous\s+messages|system\s+prompt|session\s+cookies?|"
    r"(?:user'?s?|your|their)\s+(?:\w+\s+)?(?:tokens?|passwords?|passphrases?|secrets?|credentials?))"
)
_PASS_VERBS = ("pass", "include", "put", "send", "provide", "add", "append", "insert", "copy", "embed")
_SECRET_ANCHORS = (
    "key", "token", "variable", "conversation", "history", "message", "prompt", "cookie", "password",
    "passphrase", "secret", "credential",
)  # fmt: skip

SHORT = 24  # characters: below this, the patterns run on the whole text (cheaper than the pre-checks)
Anchors = tuple[tuple[str, ...], ...]  # looked for in order: the group least often present first
# (words, before): every match starts at most `before` characters before an occurrence of a word
Starts = tuple[tuple[str, ...], int]
MODEL_RULES: list[tuple[re.Pattern[str], str, Anchors, Starts]] = [
    # read a sensitive file
    (
        re.compile(
            rf"(?is)\b(?:read|open|cat|load|include|send|attach|upload|provide|pass|get|fetch)\b.{{0,80}}?{_SENSITIVE_PATH}"
        ),
        HIGH,
        (
            _SENSITIVE_ANCHORS,
            ("read", "open", "cat", "load", "include", "send", "attach", "upload", "provide", "pass", "get", "fetch"),
        ),
        (_SENSITIVE_ANCHORS, 5 + 80 + 7),  # a path holds its anchor within 5 of its start; <= 80 + a verb before it
    ),
    (
        re.compile(rf"(?is){_SENSITIVE_PATH}.{{0,60}}?\b(?:content|contents|as\s+(?:the\s+)?(?:argument|parameter))\b"),
        HIGH,
        (_SENSITIVE_ANCHORS, ("content", "argument", "parameter")),
        (_SENSITIVE_ANCHORS, 5),
    ),
    # pass secrets or the conversation as arguments
    (
        re.compile(
            rf"(?is)\b(?:pass|include|put|send|provide|add|append|insert|copy|embed)\b.{{0,60}}?\b{_SECRET_NOUN}\b"
            r".{0,60}?\b(?:argument|parameter|field|param|sidenote|note|query|url|body)s?\b"
        ),
        HIGH,
        (
            ("argument", "param", "field", "note", "query", "url", "body"),
            _SECRET_ANCHORS,
            _PASS_VERBS,
        ),
        (_PASS_VERBS, 0),
    ),
    # keep something from the user
    (
        re.compile(
            r"(?is)\b(?:do\s+not|don'?t|never|without)\s+(?:\w+\s+){0,2}?(?:tell|telling|inform|informing|mention|mentioning|"
            r"notify|notifying|reveal|revealing|alert|alerting|show|showing|disclose|disclosing)\b.{0,30}?\buser\b"
        ),
        HIGH,
        (
            ("user",),
            ("tell", "inform", "mention", "notify", "reveal", "alert", "show", "disclos"),
            ("not", "don", "never", "without"),
        ),
        (("do", "never", "without"), 0),
    ),
    (
        re.compile(r"(?is)\b(?:the\s+)?user\s+(?:must|should|will)\s+(?:not|never)\s+(?:know|see|notice|be\s+told|find\s+out)\b"),
        HIGH,
        (("user",), ("must", "should", "will"), ("not", "never")),
        (("the", "user"), 0),
    ),
    (
        re.compile(r"(?is)\b(?:keep|hide)\b.{0,30}?\b(?:secret|hidden|confidential)\b.{0,20}?\bfrom\b.{0,20}?\buser\b"),
        HIGH,
        (("user",), ("keep", "hide"), ("secret", "hidden", "confidential"), ("from",)),
        (("keep", "hide"), 0),
    ),
    (
        re.compile(r"(?i)\b(?:secretly|silently|covertly)\b.{0,40}?\b(?:send|call|read|forward|copy|upload|include|pass)\b"),
        HIGH,
        (
            ("secretly", "silently", "covertly"),
            ("send", "call", "read", "forward", "copy", "upload", "include", "pass"),
        ),
        (("secretly", "silently", "covertly"), 0),
    ),
    # take over the model's instructions
    (
        re.compile(
            r"(?i)\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|other|system)\s+(?:instructions|rules|prompts?|directions)"
        ),
        HIGH,
        (("ignore", "disregard", "forget", "override"), ("instructions", "rules", "prompt", "directions")),
        (("ignore", "disregard", "forget", "override"), 0),
    ),
    (
        re.compile(r"(?i)</?\s*(?:important|system|instructions?|admin|secret|hidden)\s*>"),
        HIGH,
        (("<",), (">",), ("important", "system", "instruction", "admin", "secret", "hidden")),
        (("<",), 0),
    ),
    # either alternative has one word of each group: "you are now" or "new instructions:"
    (
        re.compile(r"(?i)\byou\s+are\s+now\b|\bnew\s+instructions?\s*:"),
        HIGH,
        (("now", "instruction"), ("you", "new")),
        (("you", "new"), 0),
    ),
    # call other tools first (medium: may be about the server's own tools; high when cross_server sees it)
    (
        re.compile(
            r"(?i)\bbefore\s+(?:using|calling|invoking|running)\s+(?:this|any\s+other|any)\s+tool\b.{0,40}?\b(?:must|always|first)\b"
        ),
        MEDIUM,
        (("before",), ("tool",), ("must", "always", "first")),
        (("before",), 0),
    ),
]

IMAGE = re.compile(r"!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//[^)\s]+")
URL = re.compile(r"(?i)\bhttps?://[^\s<>\"')\]]+")
# A placeholder for what the model knows (a URL template's {owner}/{repo} or {query} is none).
_LEAKED = r"[A-Za-z_]{0,20}(?:conversation|chat|history|context|messages?|secret|token|api_?key|password|prompt|summary|env|credential|ssh|memory|instructions|user_?data)[A-Za-z_]{0,20}"
PLACEHOLDER = re.compile(rf"(?i)\{{\{{?\s*{_LEAKED}\s*\}}\}}?|\$\{{?{_LEAKED}\}}?|<{_LEAKED}>|%{_LEAKED}%|\[{_LEAKED}\]")
BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=_-])")
HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9a-fA-F]{2}){40,}(?![0-9A-Fa-f])")
INSTRUCTION_WORDS = re.compile(r"(?i)\b(?:ignore|instructions?|user|read|send|call|tool|password|secret|token|file|must)\b")

# The only characters outside ASCII that re.IGNORECASE lets match an ASCII character, and the
# ASCII letter they then stand for (str.lower leaves U+0131 and U+017F alone and makes U+0130 two
# characters).
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def folded(text: str) -> str:
    """The text, lowercased for the anchors' `in` tests (see the module's docstring)."""
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


def present(folded_text: str, anchors: Anchors, seen: dict[str, bool]) -> bool:
    """Can a rule with these anchors match the text folded_text was folded from? (`seen`: the
    words looked for in this text so far, shared by its rules.)"""
    for group in anchors:
        for word in group:
            hit = seen.get(word)
            if hit is None:
                hit = seen[word] = word in folded_text
            if hit:
                break
        else:
            return False
    return True


def first_match(pattern: re.Pattern[str], visible: str, folded_text: str, starts: Starts) -> re.Match[str] | None:
    """pattern.search(visible), the pattern tried only where a match can start: at most `before`
    characters before an occurrence of one of the words in the folded text (positions line up
    when folding kept the length), in order; the whole search when those positions are many."""
    words, before = starts
    if len(folded_text) != len(visible):
        return pattern.search(visible)
    spots = sorted(q for word in words for q in _occurrences(folded_text, word))
    if len(spots) * (before + 1) > len(visible) // 4:
        return pattern.search(visible)
    pos = 0
    for q in spots:
        for p in range(max(pos, q - before), q + 1):
            if m := pattern.match(visible, p):
                return m
        pos = max(pos, q + 1)
    return None


def _occurrences(text: str, word: str) -> list[int]:
    out, at = [], text.find(word)
    while at >= 0:
        out.append(at)
        at = text.find(word, at + 1)
    return out


def _runs_table(chars: str) -> bytes:
    return bytes(ord("r") if chr(b) in chars else ord(".") for b in range(256))


_BASE64_BYTES = _runs_table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_HEX_BYTES = _runs_table("0123456789abcdefABCDEF")
_BLANK_BYTES = _runs_table(" \t\xc2\xa0")  # U+00A0 is C2 A0 in UTF-8
_LINES_BYTES = _runs_table("\n \t")
_RUN_TABLES = {"base64": _BASE64_BYTES, "hex": _HEX_BYTES, "blank": _BLANK_BYTES, "lines": _LINES_BYTES}


def encoded(text: str) -> bytes:
    """The text's UTF-8 bytes (a lone surrogate kept), for the run tests below."""
    return text.encode("utf-8", "surrogatepass")


def has_run(data: bytes, kind: str, length: int) -> bool:
    """Does data hold `length` bytes in a row of the kind's characters ("base64", "hex", "blank",
    "lines": newlines, spaces and tabs)?"""
    return len(data) >= length and b"r" * length in data.translate(_RUN_TABLES[kind])

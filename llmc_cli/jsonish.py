"""One tolerant tokeniser for JSON-ish text: what both readers of almost-JSON stand on.

`tokens` splits text into strings, comments, bare words, whitespace runs and single characters,
without judging whether the whole is valid JSON. Two readers build on it:
`config.importers.strip_jsonc` (JSON with comments, as VS Code writes it) and
`providers.text.repair_json` (the almost-JSON small models write).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Kind = Literal["string", "comment", "word", "space", "char"]


class Token(NamedTuple):
    kind: Kind
    text: str  # exactly as written: a string keeps its quotes, an unterminated one runs to the end


def tokens(text: str, *, quotes: str = '"', comments: bool = False) -> list[Token]:
    """Split `text`. A string opens with any character of `quotes` and closes at the same one,
    a backslash escaping the next character. With `comments`, `// ...` (up to, not including, the
    newline) and `/* ... */` are comment tokens. A word starts with a letter or `_` and goes on
    with letters, digits, `_` and `-`. Anything else is one `char` token."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in quotes:
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if text[end] == "\\" else 1
            out.append(Token("string", text[i : end + 1]))
            i = end + 1
        elif comments and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(Token("comment", text[i:end]))
            i = end
        elif comments and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(Token("comment", text[i:end]))
            i = end
        elif c.isalpha() or c == "_":
            end = i + 1
            while end < n and (text[end].isalnum() or text[end] in "_-"):
                end += 1
            out.append(Token("word", text[i:end]))
            i = end
        elif c.isspace():
            end = i + 1
            while end < n and text[end].isspace():
                end += 1
            out.append(Token("space", text[i:end]))
            i = end
        else:
            out.append(Token("char", c))
            i += 1
    return out


def next_significant(toks: list[Token], index: int) -> Token | None:
    """The first token after `index` that is neither whitespace nor a comment."""
    for later in range(index + 1, len(toks)):
        if toks[later].kind not in ("space", "comment"):
            return toks[later]
    return None


def is_trailing_comma(toks: list[Token], index: int) -> bool:
    """Whether the token at `index` is a comma that only a closing `}` or `]` follows."""
    after = next_significant(toks, index)
    return toks[index] == ("char", ",") and after is not None and after.text in ("}", "]")

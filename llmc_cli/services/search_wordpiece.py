"""BERT's uncased WordPiece tokenizer in Python, for the semantic stage's model
(services/search_model.py): the model's vocab (minilm_vocab.txt beside this module), text cleaned
and lower-cased with accents stripped, CJK ideographs split one per word, punctuation split off,
each word cut greedily into the longest pieces the vocab has ("##" inside a word; a word that
cannot be cut, or longer than 100 characters, is [UNK]), [CLS] ... [SEP] around, at most
MAX_TOKENS ids.

It gives the ids of the model's own tokenizer.json (the tokenizers package's BertNormalizer,
BertPreTokenizer and WordPiece) on all 5,475 texts of the tool-retrieval benchmark and on every
code point up to U+2FFFF, except ~760 code points Unicode assigned after the version the
tokenizers package's tables follow (there they are letters to be kept; here, by Python's newer
tables, marks to strip or punctuation): the tokenizers package and the huggingface_hub it depends
on (37 MB with their dependencies) are not needed.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
MAX_WORD = 100  # characters: a longer word is [UNK]
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCTUATION = frozenset(chr(c) for c in (*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)))


def _is_cjk(cp: int) -> bool:
    return any(low <= cp <= high for low, high in _CJK)


def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


def _normalize(text: str) -> str:
    """Control characters dropped, white space made a space, CJK ideographs spaced apart, then
    accents stripped (NFD, marks dropped) and lower-cased."""
    out = []
    for ch in text:
        if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif ch in "\0\ufffd" or unicodedata.category(ch) in ("Cc", "Cf", "Co"):
            continue
        elif _is_cjk(ord(ch)):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn").lower()


def _split_words(text: str) -> list[str]:
    """Split at white space, each punctuation character a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPiece:
    """text -> the model's token ids."""

    def __init__(self, vocab: Path, max_tokens: int = MAX_TOKENS) -> None:
        lines = vocab.read_text(encoding="utf-8").split("\n")
        self.vocab = {line: i for i, line in enumerate(lines) if line}
        self.max_tokens = max_tokens
        self.unknown, self.first, self.last = self.vocab["[UNK]"], self.vocab["[CLS]"], self.vocab["[SEP]"]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > MAX_WORD:
            return [self.unknown]
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                found = self.vocab.get(word[start:end] if start == 0 else "##" + word[start:end])
                if found is not None:
                    out.append(found)
                    break
                end -= 1
            else:
                return [self.unknown]
            start = end
        return out

    def encode(self, text: str) -> list[int]:
        room = self.max_tokens - 2
        ids: list[int] = []
        for word in _split_words(_normalize(text)):
            ids.extend(self._pieces(word))
            if len(ids) >= room:
                break
        return [self.first, *ids[:room], self.last]

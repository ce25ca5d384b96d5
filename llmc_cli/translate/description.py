"""A tool's description with what no provider has a field for (MCP `title` and annotations)
folded in, so it reaches the model instead of being lost."""

from __future__ import annotations

import re

from llmc_cli.model import Tool

# Annotation hints worth telling a model, in the words it reads. Only explicit `true` values are
# shown: MCP's defaults (e.g. destructiveHint defaults to true) say nothing about this tool.
HINTS = (
    ("readOnlyHint", "read-only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open-world"),
)
FILLER = {"tool", "the", "a", "an", "of", "to"}


WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def describe(tool: Tool) -> str:
    """`[read-only] Title. Description`: the title only when it has words the name and the
    description lack ("Echo Tool" adds nothing to `echo`); an empty description gets the title."""
    text = tool.description.strip()
    title = (tool.title or "").strip()
    if title and (not text or not _words(title) - FILLER <= _words(tool.name) | _words(text)):
        text = f"{title}. {text}" if text else title
    hints = tool.annotations or {}
    flags = [
        word
        for key, word in HINTS
        if hints.get(key) is True and not (key == "destructiveHint" and hints.get("readOnlyHint") is True)
    ]
    if flags:
        text = f"[{', '.join(flags)}] {text}".rstrip()
    return text

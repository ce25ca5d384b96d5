"""guard/scan.py text_findings as it was before the pre-checks of guard/rules.py (commit c0a2788),
kept as the reference tests/guard/test_scan_fast.py compares the fast scan with: every pattern
runs on the whole text. The patterns are guard/rules.py's (moved there unchanged) except padding,
which the fast scan splits in two."""

from __future__ import annotations

import re
from collections.abc import Iterator

from llmc_cli.guard import rules
from llmc_cli.guard.scan import _around, _base64_text, terminal_safe

HIGH, MEDIUM = rules.HIGH, rules.MEDIUM
_PADDING = re.compile(r"(?:\n[ \t]*){12,}|[ \t\u00a0]{120,}")


def text_findings(text: str) -> Iterator[tuple[str, str, str]]:
    if m := rules.INVISIBLE.search(text):
        hidden = "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)
        yield (
            "hidden_unicode",
            HIGH,
            terminal_safe(f"{hidden!r} hidden in tag characters" if hidden else _around(text, m.start(), m.end())),
        )
    if m := rules.CONTROL.search(text):
        yield "terminal_escape", HIGH, terminal_safe(_around(text, m.start(), m.end()))
    if m := _PADDING.search(text):
        after = text[m.end() :].strip()
        if after:
            yield "padding", HIGH, terminal_safe(f"{len(m.group())} characters of blank space, then: {after}")
    visible = rules.INVISIBLE.sub("", text)
    for pattern, severity, _anchors, _starts in rules.MODEL_RULES:
        if m := pattern.search(visible):
            yield "model_instruction", severity, terminal_safe(_around(visible, m.start(), m.end(), 30))
            if severity == HIGH:
                break
    if m := rules.IMAGE.search(visible):
        yield "exfiltration_link", HIGH, terminal_safe(m.group())
    else:
        for url in rules.URL.finditer(visible):
            if rules.PLACEHOLDER.search(url.group()):
                yield "exfiltration_link", HIGH, terminal_safe(url.group())
                break
    yield from _blobs(rules.URL.sub(" ", visible))


def _blobs(text: str) -> Iterator[tuple[str, str, str]]:
    for m in rules.BASE64.finditer(text):
        blob = m.group()
        if not (re.search(r"[a-z]", blob) and re.search(r"[A-Z]", blob)):
            continue
        decoded = _base64_text(blob)
        severity = HIGH if decoded and rules.INSTRUCTION_WORDS.search(decoded) else MEDIUM
        yield (
            "encoded_blob",
            severity,
            terminal_safe(f"base64 {blob[:40]}… decodes to: {decoded}" if decoded else f"base64 {blob}"),
        )
        return
    if h := rules.HEX.search(text):
        try:
            decoded = bytes.fromhex(h.group()).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            decoded = ""
        printable = decoded and decoded.isprintable()
        severity = HIGH if printable and rules.INSTRUCTION_WORDS.search(decoded) else MEDIUM
        if printable:
            yield "encoded_blob", severity, terminal_safe(f"hex {h.group()[:40]}… decodes to: {decoded}")

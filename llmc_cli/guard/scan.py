"""The scan of server metadata (`llmc tools scan`): a server's tool names, titles, descriptions,
argument descriptions, defaults, enums, output schema and its instructions are text a model reads
as if the user had written it. Each is looked at for:

- model_instruction (high): instructions addressed to the model that are not about using the
  tool itself — to read sensitive files, to pass secrets or the conversation as arguments, to
  keep something from the user, to ignore earlier instructions, <IMPORTANT>/<SYSTEM> tags;
- cross_server (high): one server's text naming another server's tools (steering them);
- exfiltration_link (high): a markdown image, or a URL with a placeholder for data to fill in;
- hidden_unicode (high): tag characters, zero-width characters, bidirectional overrides;
- terminal_escape (high): ESC and other control characters that act on a terminal;
- padding (high): a long run of blank lines or spaces with more text after it;
- confusable_name (high): a tool name that looks like another server's tool (homoglyphs);
- encoded_blob (medium; high when it decodes to an instruction): base64 or hex runs.

Instructions about using the tool itself ("IMPORTANT: always use absolute paths", "use this
instead of X" for the server's own X) are not findings. Pure functions over Tool objects.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterator

from llmc_cli.guard.rules import (
    BASE64,
    CONTROL,
    HEX,
    HIGH,
    IMAGE,
    INSTRUCTION_WORDS,
    INVISIBLE,
    MEDIUM,
    MODEL_RULES,
    PAD_BLANKS,
    PAD_LINES,
    PLACEHOLDER,
    SHORT,
    URL,
    encoded,
    first_match,
    folded,
    has_run,
    present,
)
from llmc_cli.model import JSONObject, Tool, dataclass

__all__ = [
    "HIGH",
    "MEDIUM",
    "RULES",
    "MetaFinding",
    "instruction_rule",
    "scan",
    "text_findings",
    "terminal_safe",
    "tool_texts",
]
RULES = (
    "model_instruction",
    "cross_server",
    "exfiltration_link",
    "hidden_unicode",
    "terminal_escape",
    "padding",
    "confusable_name",
    "encoded_blob",
)


@dataclass(frozen=True)
class MetaFinding:
    server: str
    tool: str | None  # None: the server's instructions
    field: str  # "name", "description", "inputSchema.properties.path.description", "instructions", ...
    rule: str
    severity: str
    excerpt: str

    def to_json(self) -> JSONObject:
        return {
            "server": self.server,
            "tool": self.tool,
            "field": self.field,
            "rule": self.rule,
            "severity": self.severity,
            "excerpt": self.excerpt,
        }


# --- text rules (guard/rules.py: the patterns and their pre-checks) -------------------------------


def terminal_safe(text: str, limit: int = 160) -> str:
    """An excerpt fit for a terminal: control, invisible and bidirectional characters shown as
    escapes (\\u202e), whitespace runs folded, at most `limit` characters."""
    out = []
    for ch in text:
        if ch in "\n\t\r":
            out.append(" ")
        elif CONTROL.match(ch) or INVISIBLE.match(ch) or unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    folded = re.sub(r"\s{2,}", " ", "".join(out)).strip()
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _around(text: str, start: int, end: int, width: int = 60) -> str:
    return text[max(0, start - width) : min(len(text), end + width)]


def text_findings(text: str) -> Iterator[tuple[str, str, str]]:
    """(rule, severity, excerpt) of one piece of metadata text (cross-server and name rules aside).
    Each rule's pre-check (guard/rules.py) skips the patterns that cannot match; what is found is
    what the patterns alone find (tests/guard/test_scan_fast.py holds the two side by side)."""
    if m := (None if text.isascii() else INVISIBLE.search(text)):
        hidden = "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)
        yield (
            "hidden_unicode",
            HIGH,
            terminal_safe(f"{hidden!r} hidden in tag characters" if hidden else _around(text, m.start(), m.end())),
        )
    visible = INVISIBLE.sub("", text) if m else text
    if m := CONTROL.search(text):
        yield "terminal_escape", HIGH, terminal_safe(_around(text, m.start(), m.end()))
    data = encoded(visible)
    if m := _padding(text, data if visible is text else encoded(text)):
        after = text[m.end() :].strip()
        if after:
            yield "padding", HIGH, terminal_safe(f"{len(m.group())} characters of blank space, then: {after}")
    low, seen, short = folded(visible), dict[str, bool](), len(visible) < SHORT
    for pattern, severity, anchors, starts in MODEL_RULES:
        if short:
            m = pattern.search(visible)
        else:
            m = first_match(pattern, visible, low, starts) if present(low, anchors, seen) else None
        if m:
            yield "model_instruction", severity, terminal_safe(_around(visible, m.start(), m.end(), 30))
            if severity == HIGH:
                break
    urls = "://" in visible
    if "![" in visible and (m := IMAGE.search(visible)):
        yield "exfiltration_link", HIGH, terminal_safe(m.group())
    elif urls:
        for url in URL.finditer(visible):
            if PLACEHOLDER.search(url.group()):
                yield "exfiltration_link", HIGH, terminal_safe(url.group())
                break
    if has_run(data, "base64", 40):  # a hex run is a base64 run too
        yield from _blobs(URL.sub(" ", visible) if urls else visible, has_run(data, "hex", 80))  # a URL's path is no blob


def _scoped(pattern: re.Pattern[str]) -> str:
    """The pattern as a group with its own flags (its leading inline flags made scoped), to stand
    as one alternative among others."""
    letters = "".join(f for f, flag in (("i", re.I), ("s", re.S), ("m", re.M), ("x", re.X)) if pattern.flags & flag)
    return f"(?{letters}:{re.sub(r'^[(][?][a-zA-Z]+[)]', '', pattern.pattern)})" if letters else f"(?:{pattern.pattern})"


# The high model-instruction patterns as one: a short text is searched once, not once per pattern
# (an alternation matches somewhere exactly when one of its alternatives does).
_HIGH_MODEL = re.compile("|".join(_scoped(pattern) for pattern, severity, _a, _s in MODEL_RULES if severity == HIGH))


def instruction_rule(text: str) -> str | None:
    """The rule of the first high finding text_findings makes of `text` among hidden_unicode,
    model_instruction and exfiltration_link (what services/inspect.py InstructionsInspector asks of
    every result a model reads), None when there is none; the rules it does not ask about are not
    run (tests/guard/test_instruction_rule.py holds the two side by side)."""
    if not text.isascii() and INVISIBLE.search(text):
        return "hidden_unicode"
    if len(text) < SHORT:
        if _HIGH_MODEL.search(text):
            return "model_instruction"
    else:
        low, seen = folded(text), dict[str, bool]()
        for pattern, severity, anchors, starts in MODEL_RULES:
            if severity == HIGH and present(low, anchors, seen) and first_match(pattern, text, low, starts):
                return "model_instruction"
    if "![" in text and IMAGE.search(text):
        return "exfiltration_link"
    if "://" in text and any(PLACEHOLDER.search(url.group()) for url in URL.finditer(text)):
        return "exfiltration_link"
    return None


def _padding(text: str, data: bytes) -> re.Match[str] | None:
    """The first run of blank lines or blank space (`data`: the text's bytes)."""
    lines = PAD_LINES.search(text) if has_run(data, "lines", 12) and text.count("\n") >= 12 else None
    blanks = PAD_BLANKS.search(text) if has_run(data, "blank", 120) else None
    if lines and blanks:
        return lines if lines.start() < blanks.start() else blanks
    return lines or blanks


def _blobs(text: str, hex_run: bool) -> Iterator[tuple[str, str, str]]:
    for m in BASE64.finditer(text):
        blob = m.group()
        if not (re.search(r"[a-z]", blob) and re.search(r"[A-Z]", blob)):
            continue  # a word run, a path or a hash in one case
        decoded = _base64_text(blob)
        severity = HIGH if decoded and INSTRUCTION_WORDS.search(decoded) else MEDIUM
        yield (
            "encoded_blob",
            severity,
            terminal_safe(f"base64 {blob[:40]}… decodes to: {decoded}" if decoded else f"base64 {blob}"),
        )
        return
    if hex_run and (h := HEX.search(text)):
        try:
            decoded = bytes.fromhex(h.group()).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            decoded = ""
        printable = decoded and decoded.isprintable()
        severity = HIGH if printable and INSTRUCTION_WORDS.search(decoded) else MEDIUM
        if printable:
            yield "encoded_blob", severity, terminal_safe(f"hex {h.group()[:40]}… decodes to: {decoded}")


def _base64_text(blob: str) -> str:
    """The text a base64 run decodes to, if it is text; else ''."""
    try:
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return ""
    return text if text.isprintable() and re.search(r"[A-Za-z]{3,}", text) else ""


# --- where the text is ----------------------------------------------------------------------------


def tool_texts(tool: Tool) -> Iterator[tuple[str, str]]:
    """(field, text) of every string a model reads in a tool's definition."""
    yield "name", tool.name
    if tool.title:
        yield "title", tool.title
    if tool.description:
        yield "description", tool.description
    yield from _schema_texts("inputSchema", tool.input_schema)
    if tool.output_schema:
        yield from _schema_texts("outputSchema", tool.output_schema)


def _schema_texts(where: str, schema: object) -> Iterator[tuple[str, str]]:
    """Strings of a JSON Schema: descriptions, titles, defaults, enums, examples, property names
    (without recursion: a server's schema may be of any depth)."""
    stack: list[tuple[str, object]] = [(where, schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("type", "$ref", "$schema", "format", "pattern", "required", "additionalProperties") and not isinstance(
                    value, dict
                ):
                    continue
                if key == "properties" and isinstance(value, dict):
                    for name in value:
                        if isinstance(name, str):
                            yield f"{path}.properties", name
                stack.append((f"{path}.{key}", value))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node))


# --- names -------------------------------------------------------------------------------------

# Letters of other scripts that read as Latin ones (Unicode's confusables, the common part).
_HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁɡһӏոԛꮃꓪοτνκιαβϲɩ０１２３４５６７８９",
    "aeopcyxijsdghlnqwwotvkiabcl0123456789",
)


def skeleton(name: str) -> str:
    """What a name looks like: compatibility forms folded, lookalike letters to Latin, case and
    separators dropped, the usual digit and letter lookalikes merged."""
    folded = unicodedata.normalize("NFKC", name).translate(_HOMOGLYPHS).lower()
    folded = "".join(c for c in folded if c.isalnum())
    return folded.replace("rn", "m").replace("0", "o").replace("1", "l").replace("vv", "w")


# --- the scan ------------------------------------------------------------------------------------


def scan(servers: dict[str, list[Tool]], instructions: dict[str, str | None] | None = None) -> list[MetaFinding]:
    """Every finding in the metadata of these servers (their tools, and their instructions),
    the cross-server rules judged among them."""
    findings: list[MetaFinding] = []
    instructions = instructions or {}
    own = {server: {t.name for t in tools} for server, tools in servers.items()}
    for server, tools in servers.items():
        others = _distinctive_names(servers, server, own[server])
        texts: list[tuple[str | None, str, str]] = [(t.name, f, x) for t in tools for f, x in tool_texts(t)]
        if instructions.get(server):
            texts.append((None, "instructions", instructions[server] or ""))
        for tool, field, text in texts:
            for rule, severity, excerpt in text_findings(text):
                findings.append(MetaFinding(server, tool, field, rule, severity, excerpt))
            if field != "name" and (hit := _names_another(text, others)):
                findings.append(MetaFinding(server, tool, field, "cross_server", HIGH, terminal_safe(hit)))
        findings += _confusables(servers, server, tools)
    return _dedupe(findings)


def _distinctive_names(servers: dict[str, list[Tool]], server: str, own: set[str]) -> dict[str, str]:
    """Other servers' tool names a text could only mean those by (not this server's own names,
    and not plain words: a name with a separator or a case change), and their qualified names;
    name -> the server it belongs to."""
    names: dict[str, str] = {}
    for other, tools in servers.items():
        if other == server:
            continue
        for t in tools:
            names[f"{other}.{t.name}"] = other
            if t.name not in own and re.search(r"[_\-]|[a-z][A-Z]", t.name) and len(t.name) >= 5:
                names[t.name] = other
    return names


def _names_another(text: str, names: dict[str, str]) -> str | None:
    for name in names:
        if m := re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text):
            return _around(text, m.start(), m.end(), 40) + f"  [{name} is a tool of server {names[name]}]"
    return None


def _confusables(servers: dict[str, list[Tool]], server: str, tools: list[Tool]) -> list[MetaFinding]:
    """A name that looks like another server's tool and is the lookalike (letters of other
    scripts, or 0/1/rn/vv where the other has o/l/m/w); a name outside ASCII that looks like none
    is a medium finding."""
    out = []
    others = {(s, t.name) for s, ts in servers.items() for t in ts if s != server}
    for tool in tools:
        shape = skeleton(tool.name)
        for other_server, other in others:
            if other != tool.name and skeleton(other) == shape and _lookalike(tool.name, other):
                excerpt = terminal_safe(f"{tool.name!r} looks like {other_server}.{other}")
                out.append(MetaFinding(server, tool.name, "name", "confusable_name", HIGH, excerpt))
                break
        else:
            if not tool.name.isascii():
                excerpt = terminal_safe(
                    f"{tool.name!r} has letters outside ASCII: {tool.name.encode('ascii', 'backslashreplace').decode()}"
                )
                out.append(MetaFinding(server, tool.name, "name", "confusable_name", MEDIUM, excerpt))
    return out


def _lookalike(name: str, other: str) -> bool:
    """Of two names with one skeleton, is `name` the imitation?"""
    if not name.isascii():
        return other.isascii() or len(name) != len(other)
    if not other.isascii():
        return False
    tricks = ("0", "1", "rn", "vv")
    return sum(name.lower().count(t) for t in tricks) > sum(other.lower().count(t) for t in tricks)


def _dedupe(findings: list[MetaFinding]) -> list[MetaFinding]:
    seen: set[tuple[str, str | None, str, str]] = set()
    out = []
    for f in findings:
        key = (f.server, f.tool, f.field, f.rule)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def flagged(tools: list[Tool]) -> dict[str, list[str]]:
    """The tools (by qualified name) whose metadata has a high finding, with its rules: what
    [guard] descriptions = "hide" keeps from models and gateway hosts."""
    servers: dict[str, list[Tool]] = {}
    for tool in tools:
        servers.setdefault(tool.server, []).append(tool)
    out: dict[str, list[str]] = {}
    for f in scan(servers):
        if f.severity == HIGH and f.tool is not None:
            out.setdefault(f"{f.server}.{f.tool}", [])
            if f.rule not in out[f"{f.server}.{f.tool}"]:
                out[f"{f.server}.{f.tool}"].append(f.rule)
    return out


def high_rules(findings: list[MetaFinding], server: str, tool: str) -> list[str]:
    """The high-severity rules a tool's metadata broke (what [guard] descriptions = "hide" hides it for)."""
    return sorted({f.rule for f in findings if f.server == server and f.tool == tool and f.severity == HIGH})


def tool_verdict(tool: Tool) -> list[str]:
    """The scan's verdict on one tool's own metadata, as the lock file pins it: its findings'
    "severity:rule", sorted (an empty list: clean). The same single-tool scan [guard] descriptions
    = "hide" judges a call by."""
    return sorted({f"{f.severity}:{f.rule}" for f in scan({tool.server: [tool]}) if f.tool == tool.name})

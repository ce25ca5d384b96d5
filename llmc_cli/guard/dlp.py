"""DLP on what servers return: the detectors of [dlp] (and a server's own lists) run over every
text a result carries — content text, structuredContent strings (and keys), resource contents,
prompt messages, error messages — before anything sees it. `redact` kinds are replaced by
[REDACTED:kind]; a `block` kind found fails the call (PolicyDenied, exit 4) and nothing of the
result is shown. What was found is counted by kind, never kept."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from llmc_cli.model import dataclass

if TYPE_CHECKING:
    from llmc_cli.config.schema import Profile
    from llmc_cli.config.secrets import Masker
    from llmc_cli.guard.detectors import Found

# Fields that carry no text a person or a model reads: types, encodings, base64 payloads, links.
_SKIPPED = frozenset({"type", "mimeType", "blob", "uri", "uriTemplate", "annotations", "_meta", "progressToken"})


@dataclass(frozen=True)
class Rules:
    """The DLP of one server's results under a profile."""

    redact: tuple[str, ...] = ()
    block: tuple[str, ...] = ()
    phone_regions: tuple[str, ...] = ("US",)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.block, *self.redact)))

    def __bool__(self) -> bool:
        return bool(self.redact or self.block)


def rules_for(profile: Profile, server: str) -> Rules:
    """[dlp] of the profile, or the server's own redact/block lists; none for a server with dlp = false."""
    config = profile.servers.get(server)
    if config is not None and not config.dlp:
        return Rules()
    redact = profile.dlp.redact if config is None or config.redact is None else config.redact
    block = profile.dlp.block if config is None or config.block is None else config.block
    return Rules(tuple(redact), tuple(block), tuple(profile.dlp.phone_regions))


@dataclass
class Scanned:
    """What the detectors made of one result: the result as it may be shown, and the count of
    findings by kind (a kind in `blocked` means the result must not be shown at all)."""

    result: Any
    found: dict[str, int] = field(default_factory=dict)
    blocked: list[str] = field(default_factory=list)

    def denial(self, what: str) -> tuple[str, str]:
        """(rule, reason) when a kind is blocked: `what` (the result of T, ...) carries it."""
        return denial(self.blocked, self.found, what)


class Scanner:
    """The detectors of one set of rules, with the profile's own secrets (profile_secret)."""

    def __init__(self, rules: Rules, known: Masker | None = None) -> None:
        from llmc_cli.guard import detectors  # their patterns compile with the first Scanner, not with the profile

        self.rules = rules
        self.known = known
        self._detectors = detectors

    def spans(self, text: str) -> list[Found]:
        detectors = self._detectors

        def known(value: str) -> Iterable[Found]:
            if self.known is not None:
                yield from (detectors.Found("profile_secret", s, e) for s, e in self.known.spans(value))

        spans: list[Found] = detectors.find(text, self.rules.kinds, known, self.rules.phone_regions)
        return spans

    def text(self, value: str, found: dict[str, int]) -> str:
        spans = self.spans(value)
        if not spans:
            return value
        for span in spans:
            found[span.kind] = found.get(span.kind, 0) + 1
        return self._detectors.redact(value, spans)

    def inspect(self, value: Any) -> Scanned:
        """A copy of a JSON value with each finding in its strings (and object keys) redacted,
        and the count by kind; walks without recursion (results are untrusted JSON of any depth)."""
        found: dict[str, int] = {}
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
        while stack:
            item, parent, slot = stack.pop()
            if isinstance(item, str):
                out: Any = self.text(item, found)
            elif isinstance(item, dict):
                out = {}
                for k, v in item.items():
                    key = self.text(k, found) if isinstance(k, str) else k
                    if k in _SKIPPED:
                        out[key] = v
                    elif k == "data" and item.get("type") in ("image", "audio"):
                        out[key] = v  # base64 media
                    else:
                        out[key] = None
                        stack.append((v, out, key))
            elif isinstance(item, list):
                out = [None] * len(item)
                stack.extend((v, out, i) for i, v in enumerate(item))
            else:
                out = item
            parent[slot] = out
        blocked = [k for k in self.rules.block if k in found]
        return Scanned(root[0] if found else value, found, blocked)


def denial(blocked: list[str], found: dict[str, int], what: str) -> tuple[str, str]:
    """(rule, reason) of a blocked result: names the rule and the kinds, never a value."""
    kinds = ", ".join(f"{k} ({found[k]})" for k in blocked)
    return f"dlp.block:{blocked[0]}", f"{what} carries {kinds}, which [dlp] block withholds"

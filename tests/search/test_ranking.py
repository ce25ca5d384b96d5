"""Tool search's words and ranking (services/search.py, search_text.py): the Unicode tokenizer,
allowed values and nested argument docs in the index, the query's noise words and numbers,
server boilerplate counted down; and `llmc tools search --explain` through the real CLI on an
`mcp` SDK server (tests/peers/sdk_toolbox.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llmc_cli.model import Tool
from llmc_cli.services import search
from llmc_cli.services.search import ToolIndex
from llmc_cli.services.search_text import MAX_SCHEMA_NODES, query_words, schema_text, words
from tests.helpers import llmc, profile_file, sdk_server


def tool(name: str, description: str = "", schema: dict | None = None, server: str = "s") -> Tool:
    return Tool(server, name, schema or {"type": "object", "properties": {}}, description=description)


def ranked(tools: list[Tool], query: str, n: int = 3) -> list[str]:
    return [m.tool.qualified_name for m in ToolIndex(tools).search(query, n)]


# --- the tokenizer -----------------------------------------------------------------------------


def test_words_fold_case_and_accents_in_any_script():
    assert words("Zürich ZÜRICH zurich") == ["zurich"] * 3
    assert words("Café CAFÉ") == ["cafe", "cafe"]
    assert words("Straße") == words("STRASSE") == words("strasse")
    assert words("Genève, Ελλάδα, Москва") == [*words("geneve"), "ελλαδα", "москва"]
    assert words("getUserName file-path a.b_c") == ["get", "user", "name", "file", "path", "b", "c"]


def test_chinese_japanese_korean_runs_are_character_pairs():
    assert words("天气预报") == ["天气", "气预", "预报"]
    assert words("天") == ["天"]
    assert words("뉴스를 찾아줘") == ["뉴스", "스를", "찾아", "아줘"]
    assert words("getWeather天气") == ["get", "weather", "天气"]
    assert words("カタカナ") == ["カタ", "タカ", "カナ"]


def test_non_ascii_queries_find_their_tools():
    tools = [
        tool("weather", "城市天气预报"),
        tool("news", "최근 뉴스 검색"),
        tool("cafes", "Find a café nearby"),
        tool("route", "Route from Zürich to Genève"),
        tool("other", "Something else entirely"),
    ]
    assert ranked(tools, "北京天气")[0] == "s.weather"
    assert ranked(tools, "박지성 뉴스를 찾아줘")[0] == "s.news"
    assert ranked(tools, "CAFE")[0] == "s.cafes"
    assert ranked(tools, "zurich geneve")[0] == "s.route"


# --- what the schema says ----------------------------------------------------------------------


def test_schema_text_reads_nested_arguments_enums_and_branches():
    schema = {
        "type": "object",
        "description": "the root's own words are the tool's, not read here",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit", 3]},
            "stops": {
                "type": "array",
                "items": {"type": "object", "properties": {"postal_code": {"type": "string", "description": "Postal code"}}},
            },
            "target": {"anyOf": [{"$ref": "#/$defs/Car"}, {"type": "string", "const": "garage", "title": "Home base"}]},
        },
        "$defs": {"Car": {"type": "object", "properties": {"plate": {"type": "string", "description": "Licence plate"}}}},
    }
    names, docs, values = schema_text(schema)
    assert set(names) == set(words("unit stops target postal_code plate"))
    assert set(docs) == set(words("Postal code Home base Licence plate"))
    assert values == words("celsius fahrenheit garage")  # text only: 3 is no word


def test_a_query_in_the_words_of_an_allowed_value_finds_the_tool():
    climate = tool(
        "set_climate",
        "Adjust the air.",
        {"type": "object", "properties": {"mode": {"type": "string", "enum": ["heat", "cool", "defrost"]}}},
    )
    tools = [climate, tool("wipers", "Run the wipers."), tool("seat", "Move the seat.")]
    assert ranked(tools, "defrost the windscreen")[0] == "s.set_climate"


def test_nested_argument_docs_are_indexed():
    route = tool(
        "plan",
        "Plan a trip.",
        {
            "type": "object",
            "properties": {
                "stops": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"zip": {"type": "string", "description": "Postal code of the waypoint"}},
                    },
                }
            },
        },
    )
    assert ranked([route, tool("weather", "Weather of a city.")], "postal code waypoint") == ["s.plan"]


def test_a_huge_schema_is_read_up_to_a_bound():
    deep: dict = {"type": "string", "description": "bottom"}
    for n in range(1000):
        deep = {"type": "object", "properties": {f"level{n}": deep}}
    names, docs, _values = schema_text(deep)
    assert len(names) <= MAX_SCHEMA_NODES and "bottom" not in docs


# --- the query's noise -------------------------------------------------------------------------


def test_question_words_numbers_and_times_leave_the_query():
    assert query_words("What is the weather in Paris at 10:30 on the 3rd, 2024?") == words("weather Paris")
    assert query_words("How much will 100 USD be in EUR") == ["usd", "eur"]
    assert query_words("tell me how") == ["tell", "how"]  # nothing else: the words are meant
    assert query_words("convert mp3 to wav") == ["convert", "mp3", "wav"]  # not bare numbers


def test_numbers_in_a_query_do_not_pick_tools_with_digits_in_their_names():
    tools = [tool("timer_10_30", "A timer."), tool("convert_currency", "Convert money between currencies.")]
    assert ranked(tools, "convert 10 dollars at 10:30") == ["s.convert_currency"]
    assert ranked(tools, "what was how much") == []


# --- server boilerplate ------------------------------------------------------------------------

SHARED = "This tool belongs to the file system, which lets users copy, move, list and remove files. "


def file_system(server: str = "fs") -> list[Tool]:
    return [
        tool("cp", SHARED + "Duplicate one path.", server=server),
        tool("mv", SHARED + "Rename a path.", server=server),
        tool("ls", SHARED + "Show a directory.", server=server),
        tool("rm", SHARED + "Delete a path.", server=server),
    ]


def test_text_every_tool_of_a_server_shares_counts_less():
    together = ToolIndex(file_system())
    apart = ToolIndex([Tool(f"fs{i}", t.name, t.input_schema, description=t.description) for i, t in enumerate(file_system())])
    # the same tools, each alone on its server: the shared words are nobody's boilerplate there
    assert together.search("remove files", 1)[0].score < apart.search("remove files", 1)[0].score
    why = together.search("remove files", 1, explain=True)[0].why
    assert why is not None
    boiler = {t["term"]: t.get("boilerplate") for t in why["terms"]}
    assert boiler["remov"] == pytest.approx(search.BOILERPLATE_FLOOR)
    # the words a tool does not share decide between the server's tools
    assert ranked(file_system(), "delete the files")[0] == "fs.rm"
    assert ranked(file_system(), "rename the files")[0] == "fs.mv"


def test_a_server_of_few_tools_has_no_boilerplate():
    index = ToolIndex(file_system()[:2])
    why = index.search("remove files", 1, explain=True)[0].why
    assert why is not None and not [t for t in why["terms"] if "boilerplate" in t]


# --- explain ------------------------------------------------------------------------------------


def test_explain_splits_each_terms_score_over_its_fields():
    climate = tool(
        "set_climate",
        "Adjust the climate of the cabin.",
        {"type": "object", "properties": {"mode": {"type": "string", "enum": ["heat", "defrost"]}}},
    )
    match = ToolIndex([climate, tool("seat", "Move the seat.")]).search("defrost the climate", 1, explain=True)[0]
    assert match.why is not None
    terms = {t["term"]: t for t in match.why["terms"]}
    assert set(terms) == {"defrost", "climat"}
    assert set(terms["climat"]["fields"]) == {"name", "description"}
    assert list(terms["defrost"]["fields"]) == ["values"]
    total = sum(float(t["score"]) for t in match.why["terms"])
    assert total == pytest.approx(match.score, rel=1e-3)
    assert sum(terms["climat"]["fields"].values()) == pytest.approx(terms["climat"]["score"], rel=1e-3)
    assert "why" in match.to_json() and "why" not in ToolIndex([climate]).search("defrost")[0].to_json()


def test_explain_names_the_synonym_a_term_came_from():
    match = ToolIndex([tool("remove_item", "Erase one item.")]).search("delete item", 1, explain=True)[0]
    assert match.why is not None
    erase = next(t for t in match.why["terms"] if t["term"] == "remov")
    assert erase["synonym"] is True and erase["query_word"] == "delet"


def toolbox_profile(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.car]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("sdk_toolbox.py")[1])}]
""",
    )


def test_tools_search_explain_through_the_cli(isolated_dirs):
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", "turn on the defrost", "--explain", "--format", "json")
    assert run.returncode == 0, run.stderr
    rows = run.json()["tools"]
    assert rows[0]["tool"] == "setClimate"
    terms = {t["term"]: t for t in rows[0]["why"]["terms"]}
    assert "values" in terms["defrost"]["fields"]
    assert all("why" in r for r in rows)
    plain = llmc("tools", "search", "turn on the defrost", "--format", "json")
    assert plain.returncode == 0 and "why" not in plain.json()["tools"][0]


def test_tools_search_explain_on_a_terminal_reads_as_lines(isolated_dirs):
    toolbox_profile(isolated_dirs)
    run = llmc("tools", "search", "postal code of the stop", "--explain", "--format", "table", "-n", "2")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("1. car.setNavigation  score ")
    assert any(line.split()[0] == "postal" and "argdocs" in line for line in lines[1:])
    shared = llmc("tools", "search", "vehicle engine", "--explain", "--format", "table", "-n", "1")
    assert "shared by this server's tools" in shared.stdout
    assert llmc("tools", "search", "Zürich", "--format", "json").json()["tools"][0]["tool"] == "wetter"
    assert llmc("tools", "search", "天气", "--format", "json").json()["tools"][0]["tool"] == "wetter"
    none = llmc("tools", "search", "xylophone", "--explain", "--format", "table")
    assert none.returncode == 0 and none.stdout == "" and "no tools" in none.stderr

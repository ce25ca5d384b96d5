"""Behaviour of translate() and lint() on the hard cases: names, strict mode, Gemini's property
names and the way back, unions and references, limits, descriptions."""

from __future__ import annotations

import copy
import json

import pytest
from jsonschema import Draft202012Validator

from llmc_cli.model import Tool
from llmc_cli.translate import FORMATS, LINT_FORMATS, lint, translate
from llmc_cli.translate.names import RULES, assign, property_names
from tests.translate.cases import hard_tools, many_tools, sdk_tools, stored, validate


def by_owner(result, server, tool):
    return result.names.provider_name(server, tool)


def definition(result, name):
    if result.format in ("gemini", "gemini-legacy"):
        decls = result.definitions[0]["function_declarations"]
    else:
        decls = [d.get("function", d) for d in result.definitions]
    return next(d for d in decls if d["name"] == name)


def test_one_server_keeps_its_names_several_are_namespaced():
    one = [Tool("fs", "read_file", {"type": "object"}), Tool("fs", "get-sum", {"type": "object"})]
    assert sorted(translate(one, "openai").names) == ["get-sum", "read_file"]
    two = [*one, Tool("erp", "read_file", {"type": "object"})]
    names = translate(two, "anthropic").names
    assert dict(names) == {
        "fs_read_file": ("fs", "read_file"),
        "fs_get-sum": ("fs", "get-sum"),
        "erp_read_file": ("erp", "read_file"),
    }


def test_names_that_collide_after_sanitising_stay_apart_whatever_the_order():
    owners = [("h", "files/read"), ("h", "files.read"), ("h", "files_read")]
    first, findings = assign(owners, "openai", "openai")
    second, _ = assign(owners[::-1], "openai", "openai")
    assert dict(first) == dict(second) and len(first) == 3
    assert first.provider_name("h", "files_read") == "files_read"  # the legal name is the server's own
    assert all(RULES["openai"].legal(n) for n in first)
    assert {f.tool for f in findings} == {"h.files/read", "h.files.read"}
    assert all(f.path == "$.name" and "must match" in f.why for f in findings)


def test_namespacing_collisions_are_kept_apart_too():
    names, findings = assign([("a_b", "c"), ("a", "b_c")], "openai", "openai")
    assert len(set(names)) == 2 and all(n.startswith("a_b_c_") for n in names)
    assert all("same name" in f.why for f in findings)


def test_long_and_odd_names_follow_each_providers_rules():
    owners = [("s", "x" * 200), ("s", "9.start:here/now")]
    for rules in ("openai", "gemini", "gemini-legacy", "text"):
        names, _ = assign(owners, rules, rules)
        assert all(RULES[rules].legal(n) for n in names), (rules, list(names))
    gemini, _ = assign(owners, "gemini", "gemini")
    assert gemini.provider_name("s", "9.start:here/now") == "_9.start:here_now"  # `.` and `:` are legal there


def test_property_names_are_legal_distinct_and_stable():
    names = ["file-name", "a.b", "a_b", "9lives", "ok", "é"]
    mapped = property_names(names)
    assert mapped == property_names(reversed(names))
    assert mapped["ok"] == "ok" and mapped["a_b"] == "a_b" and mapped["file-name"] == "file_name"
    assert len(set(mapped.values())) == len(names)
    assert all(RULES["gemini"].legal(n) and "." not in n for n in mapped.values())


@pytest.mark.parametrize("fmt", ["gemini", "gemini-legacy"])
def test_gemini_renamed_arguments_map_back_to_the_mcp_names(fmt):
    result = translate(hard_tools(), fmt)
    name = by_owner(result, "h", "odd.props")
    schema = definition(result, name)["parameters_json_schema" if fmt == "gemini" else "parameters"]
    assert set(schema["properties"]) == {"file_name", "a_b", "a_b_2e7336dc", "_9lives"}
    assert schema["required"] == ["file_name"]
    args = {"file_name": "x", "a_b": 1, "a_b_2e7336dc": 2, "_9lives": {"x_y": "deep"}}
    Draft202012Validator(schema).validate(args)  # what the model may send ...
    back = result.arguments_back(name, args)
    assert back == {"file-name": "x", "a_b": 1, "a.b": 2, "9lives": {"x-y": "deep"}}
    Draft202012Validator(result.tools[name].input_schema).validate(back)  # ... is what the server accepts
    assert result.arguments_back(name, {"unknown-key": 1}) == {"unknown-key": 1}
    assert result.arguments_back("no-such-tool", {"a_b": 1}) == {"a_b": 1}
    assert any("'a.b' renamed to 'a_b_2e7336dc'" in w.what for w in result.warnings)


def test_gemini_renames_inside_refs_and_unions_map_back():
    schema = {
        "type": "object",
        "$defs": {"P": {"type": "object", "properties": {"first-name": {"type": "string"}}}},
        "properties": {
            "people": {"type": "array", "items": {"$ref": "#/$defs/P"}},
            "either": {"anyOf": [{"type": "object", "properties": {"x-1": {"type": "integer"}}}, {"type": "null"}]},
        },
    }
    result = translate([Tool("s", "t", schema)], "gemini")
    sent = definition(result, "t")["parameters_json_schema"]
    assert "first_name" in sent["$defs"]["P"]["properties"]
    back = result.arguments_back("t", {"people": [{"first_name": "Ada"}], "either": {"x_1": 3}})
    assert back == {"people": [{"first-name": "Ada"}], "either": {"x-1": 3}}


def test_openai_strict_mode_keeps_refs_and_makes_optional_properties_nullable():
    place = sdk_tools()[1]  # find(customer_id, since=None, limit=10)
    result = translate([place], "openai", strict=True)
    fn = result.definitions[0]["function"]
    assert fn["strict"] is True
    params = fn["parameters"]
    assert params["additionalProperties"] is False and params["required"] == ["customer_id", "since", "limit"]
    assert params["properties"]["limit"]["type"] == ["integer", "null"]
    # the model must send every key; nulls for what the server treats as optional are removed again
    sent = {"customer_id": 7, "since": None, "limit": None}
    Draft202012Validator(params).validate(sent)
    back = result.arguments_back("find", sent)
    assert back == {"customer_id": 7, "since": None}  # `since` accepts null on the server; `limit` does not
    Draft202012Validator(place.input_schema).validate(back)


def test_strict_recursive_refs_stay_refs():
    result = translate([hard_tools()[0]], "openai-responses", strict=True)
    params = result.definitions[0]["parameters"]
    assert result.definitions[0]["strict"] is True
    assert params["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert params["$defs"]["Node"]["additionalProperties"] is False


def test_strict_explains_each_tool_that_cannot_be_strict():
    result = translate(hard_tools(), "openai", strict=True)
    by_tool = {}
    for w in result.warnings:
        if w.what.startswith("cannot be strict"):
            by_tool.setdefault(w.tool, []).append(w)
    assert set(by_tool) == {"h.merged", "h.map", "h.draft7"}
    assert {w.path.rsplit(".", 1)[-1] for w in by_tool["h.draft7"]} == {"any", "yes", "no", "patternProperties", "pat"}
    assert by_tool["h.merged"][0].path.endswith("properties.x.allOf")
    assert by_tool["h.map"][0].path.endswith("properties.labels.additionalProperties")
    assert definition(result, "merged")["strict"] is False and definition(result, "tree")["strict"] is True
    # a tool that went out non-strict gets no null-dropping on the way back
    assert result.arguments_back("merged", {"x": None}) == {"x": None}
    shapes = [w for w in result.warnings if w.tool == "h.shapes"]
    assert [w.what for w in shapes] == ["oneOf turned into anyOf"]


def test_without_strict_openai_and_anthropic_pass_the_schema_through():
    tools = stored("filesystem")
    for fmt in ("openai", "openai-responses", "anthropic"):
        result = translate(tools, fmt)
        assert not result.warnings
        for tool, d in zip(tools, result.definitions, strict=True):
            d = d.get("function", d)
            assert d.get("parameters", d.get("input_schema")) == tool.input_schema
            assert d.get("strict", False) is False


def test_gemini_json_schema_cleaning():
    result = translate(hard_tools(), "gemini")
    fixed = definition(result, "fixed")["parameters_json_schema"]
    assert "$schema" not in fixed and fixed["properties"]["kind"] == {"enum": ["v1"]}
    assert fixed["properties"]["n"] == {"type": "integer", "description": "(exclusiveMinimum: 0)"}
    merged = definition(result, "merged")["parameters_json_schema"]["properties"]["x"]
    assert merged["required"] == ["a"] and set(merged["properties"]) == {"a", "b"} and "allOf" not in merged
    tree = definition(result, "tree")["parameters_json_schema"]
    assert tree["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}  # Gemini reads $ref
    what = {(w.tool, w.what) for w in result.warnings}
    assert {("h.fixed", "const turned into a one-value enum"), ("h.merged", "allOf merged into one schema")} <= what


def test_gemini_legacy_openapi_subset():
    result = translate(sdk_tools() + hard_tools(), "gemini-legacy")
    assert by_owner(result, "shop", "place") == "shop_place"  # two servers: namespaced
    place = definition(result, "shop_place")["parameters"]
    ship_to = place["properties"]["order"]["properties"]["ship_to"]
    assert ship_to["properties"]["city"] == {"type": "string", "nullable": True}  # anyOf with null -> nullable
    assert ship_to["properties"]["tags"] == {"description": "Free-form labels", "type": "object"}
    assert place["properties"]["mode"]["enum"] == ["normal", "express"]
    fixed = definition(result, "h_fixed")["parameters"]["properties"]
    assert fixed["level"] == {"type": "integer", "description": "(one of: [1, 2, 3])"}  # not strings: words
    assert fixed["url"] == {"type": "string", "description": '(format: "uri")'}
    tree = definition(result, "h_tree")["parameters"]["properties"]["root"]
    assert tree["properties"]["children"]["items"] == {"type": "object"}
    shape = definition(result, "h_shapes")["parameters"]["properties"]["shape"]
    assert shape["type"] == "object" and "oneOf" in shape["description"]
    what = {(w.tool, w.what) for w in result.warnings}
    assert ("h.tree", "$ref #/$defs/Node replaced by any object") in what
    assert any(w.tool == "h.tree" and w.why.endswith("it is recursive") for w in result.warnings)
    assert ("h.shapes", "oneOf of 2 options dropped (kept as words in the description)") in what
    assert ("shop.place", "additionalProperties dropped") in what


def test_title_and_annotations_are_folded_into_the_description():
    tool = Tool(
        "h",
        "files_read",
        {"type": "object"},
        description="Reads files.",
        title="File reader",
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
    for fmt in ("openai-responses", "anthropic", "gemini"):
        d = translate([tool], fmt).definitions
        d = d[0]["function_declarations"][0] if fmt == "gemini" else d[0]
        assert d["description"] == "[read-only] File reader. Reads files."
    assert "[read-only] File reader. Reads files." in translate([tool], "text").definitions
    same = Tool("h", "read_file", {"type": "object"}, description="Read a file.", title="Read File")
    assert translate([same], "anthropic").definitions[0]["description"] == "Read a file."  # title says nothing new
    echo = Tool("h", "echo", {"type": "object"}, description="Echoes back the input", title="Echo Tool")
    assert translate([echo], "anthropic").definitions[0]["description"] == "Echoes back the input"
    empty = Tool("h", "read_file", {"type": "object"}, title="Read File", annotations={"destructiveHint": True})
    assert translate([empty], "anthropic").definitions[0]["description"] == "[destructive] Read File"


def test_provider_limits_are_reported():
    tools = many_tools(200)
    for fmt in ("openai", "openai-responses", "gemini", "gemini-legacy"):
        result = translate(tools, fmt)
        limit = [w for w in result.warnings if w.tool == "*"]
        assert len(limit) == 1 and limit[0].what == "200 tools, more than 128", fmt
        validate(fmt, result.definitions)
        assert len(result.names) == 200
    assert not [w for w in translate(tools, "anthropic").warnings if w.tool == "*"]


def test_duplicate_tools_are_reported_and_the_first_kept():
    a = Tool("s", "t", {"type": "object"}, description="first")
    b = Tool("s", "t", {"type": "object"}, description="second")
    result = translate([a, b], "anthropic")
    assert [d["description"] for d in result.definitions] == ["first"]
    assert [w.what for w in result.warnings] == ["duplicate tool left out"]


def test_non_object_roots_are_reported():
    result = translate(
        [Tool("s", "t", {"type": "string"}), Tool("s", "u", {"properties": {"a": {"type": "string"}}})], "anthropic"
    )
    assert [d["input_schema"] for d in result.definitions] == [
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"a": {"type": "string"}}},
    ]
    assert [w.what for w in result.warnings] == [
        "root schema is not an object: replaced by an object with no properties",
        '"type": "object" added',
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_translation_leaves_the_input_alone_and_is_plain_json(fmt):
    tools = hard_tools() + sdk_tools()
    before = copy.deepcopy([t.raw or t.input_schema for t in tools])
    result = translate(tools, fmt, strict=True)
    assert [t.raw or t.input_schema for t in tools] == before
    assert json.loads(json.dumps(result.definitions)) == result.definitions


def test_text_listing_names_what_to_write():
    tools = stored("everything")
    text = translate(tools, "text").definitions
    assert "## get-sum\n" in text and "- a (number, required): First number" in text
    two = translate([*tools[:1], Tool("other", "x", {"type": "object"})], "text")
    assert "## everything_echo\n" in two.definitions and two.names["everything_echo"] == ("everything", "echo")


def test_unknown_format_is_a_value_error():
    with pytest.raises(ValueError, match="unknown format 'cohere'"):
        translate([], "cohere")


def test_lint_reports_every_provider_with_a_reason():
    findings = lint(stored("everything") + hard_tools(), strict=True)
    assert {f.target for f in findings} == set(LINT_FORMATS)
    assert all(f.tool and f.path.startswith("$") and f.what and f.why for f in findings)
    assert {f.target for f in lint(hard_tools(), ["gemini-legacy"])} == {"gemini-legacy"}
    assert lint(stored("filesystem"), ["openai", "anthropic"]) == []


def test_a_web_of_references_cannot_blow_up_the_output():
    defs = {
        f"D{i}": {"type": "object", "properties": {"l": {"$ref": f"#/$defs/D{i + 1}"}, "r": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(14)
    }  # 2**14 paths when inlined
    defs["D14"] = {"type": "string"}
    tool = Tool("s", "web", {"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs})
    result = translate([tool], "gemini-legacy")
    validate("gemini-legacy", result.definitions)
    assert len(json.dumps(result.definitions)) < 200_000
    assert any(w.why.endswith("grows too large when inlined") for w in result.warnings)

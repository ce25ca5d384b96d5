"""Translation of real manifests into every provider's format, validated offline by each
provider SDK's own types plus llmc's own name and schema checks (the SDK types check neither)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from llmc_cli.mcp.client import connect
from llmc_cli.model import ServerSpec, Tool
from llmc_cli.translate import FORMATS, lint, translate
from tests.helpers import node_tool, sdk_server

class Address(BaseModel):
    street: str
    city: str | None = None


class Order(BaseModel):
    items: list[str]
    ship_to: Address
    priority: int | None = None


OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$")
GEMINI_PROPERTY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
GEMINI_REJECTS = {"$schema", "const", "not", "examples", "patternProperties", "uniqueItems"}  # the service takes $ref, anyOf
LEGACY_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required",
               "minItems", "maxItems"}


@pytest.fixture(scope="module")
def real_tools(tmp_path_factory) -> list[Tool]:
    """The live manifests of server-everything, server-filesystem and an SDK server."""
    root = tmp_path_factory.mktemp("fs")
    servers = {"everything": (node_tool("mcp-server-everything"),),
               "fs": (node_tool("mcp-server-filesystem"), str(root)),
               "sdk": tuple(sdk_server("sdk_server.py"))}
    tools: list[Tool] = []
    for name, argv in servers.items():
        with connect(ServerSpec(name=name, command=argv), use_cache=False) as session:
            tools += [Tool.from_mcp(name, raw) for raw in session.list_tools()]
    return tools


def pydantic_tools() -> list[Tool]:
    """An SDK server's manifest with $defs/$ref, anyOf with null, enums and nested objects."""
    import anyio

    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="shop")

    @server.tool(description="Place an order.")
    def place(order: Order, mode: str = "normal") -> str:
        return "ok"

    raw = anyio.run(server.list_tools)
    return [Tool.from_mcp("shop", t.model_dump(mode="json", by_alias=True, exclude_none=True)) for t in raw]


def hard_tools() -> list[Tool]:
    node = {"type": "object", "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
    return [
        Tool("h", "tree", {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "$defs": {"Node": node}}),
        Tool("h", "shapes", {"type": "object", "properties": {"shape": {"oneOf": [
            {"type": "object", "properties": {"r": {"type": "number"}}},
            {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}}}]}}}),
        Tool("h", "merged", {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}, {"minLength": 2}]}}}),
        Tool("h", "fixed", {"type": "object", "properties": {"kind": {"const": "v1"}, "n": {"type": "integer", "exclusiveMinimum": 0}},
                             "$schema": "https://json-schema.org/draft/2020-12/schema"}),
        Tool("h", "odd.props", {"type": "object", "properties": {"file-name": {"type": "string"}, "a.b": {"type": "integer"}},
                                 "required": ["file-name"]}),
        Tool("h", "files/read", {"type": "object"}, title="Read files", annotations={"readOnlyHint": True}),
        Tool("h", "files.read", {"type": "object"}),
    ]


def validate(fmt: str, definitions: Any) -> None:
    """The SDKs' own types, offline."""
    if fmt == "openai":
        from openai.types.chat import ChatCompletionToolParam
        for d in definitions:
            TypeAdapter(ChatCompletionToolParam).validate_python(d)
            assert OPENAI_NAME.match(d["function"]["name"]) and isinstance(d["function"]["strict"], bool)
    elif fmt == "openai-responses":
        from openai.types.responses import FunctionToolParam
        for d in definitions:
            TypeAdapter(FunctionToolParam).validate_python(d)
            assert OPENAI_NAME.match(d["name"]) and "parameters" in d and "strict" in d
    elif fmt == "anthropic":
        from anthropic.types import ToolParam
        for d in definitions:
            TypeAdapter(ToolParam).validate_python(d)
            assert OPENAI_NAME.match(d["name"]) and d["input_schema"]["type"] == "object"
    elif fmt in ("gemini", "gemini-legacy"):
        from google.genai import types
        for tool in definitions:
            types.Tool.model_validate(tool)
            for d in tool["function_declarations"]:
                assert GEMINI_NAME.match(d["name"])
                schema = d["parameters_json_schema"] if fmt == "gemini" else d["parameters"]
                if fmt == "gemini-legacy":
                    types.Schema.model_validate(schema)
                for key, value in walk(schema):
                    if fmt == "gemini":
                        assert key not in GEMINI_REJECTS, (d["name"], key)
                    else:
                        assert key in LEGACY_KEYS, (d["name"], key)
                    if key == "properties":
                        assert all(GEMINI_PROPERTY.match(p) for p in value), list(value)
                    if key == "enum" and fmt == "gemini-legacy":
                        assert all(isinstance(v, str) for v in value)


def walk(schema: Any):
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key, value
            if key == "properties":
                for prop in value.values():
                    yield from walk(prop)
            elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
                yield from walk(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from walk(item)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("strict", [False, True])
def test_real_manifests_translate_to_valid_definitions(real_tools, fmt, strict):
    result = translate(real_tools, fmt, strict=strict)
    if fmt == "text":
        assert all(t.name in result.definitions or t.qualified_name.replace(".", "_") in result.definitions for t in real_tools)
        return
    validate(fmt, result.definitions)
    assert sorted(result.names.values()) == sorted((t.server, t.name) for t in real_tools)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in ("mcp", "text")])
@pytest.mark.parametrize("strict", [False, True])
def test_hard_and_sdk_cases_translate_to_valid_definitions(fmt, strict):
    tools = hard_tools() + pydantic_tools()
    result = translate(tools, fmt, strict=strict)
    validate(fmt, result.definitions)
    assert len(set(result.names)) == len(tools)  # no collisions after sanitising
    for name, (server, tool) in result.names.items():
        assert result.names.provider_name(server, tool) == name


def test_mcp_format_is_the_servers_own_json(real_tools):
    assert translate(real_tools, "mcp").definitions == [t.raw for t in real_tools]


def test_one_server_keeps_its_names_several_are_namespaced():
    one = [Tool("fs", "read_file", {"type": "object"})]
    assert list(translate(one, "openai").names) == ["read_file"]
    two = one + [Tool("erp", "read_file", {"type": "object"})]
    assert sorted(translate(two, "openai").names) == ["erp_read_file", "fs_read_file"]


def test_colliding_names_are_kept_apart_and_reported():
    result = translate(hard_tools(), "openai")
    names = [d["function"]["name"] for d in result.definitions]
    assert len(names) == len(set(names))
    assert result.names[names[-1]] == ("h", "files.read") and result.names[names[-2]] == ("h", "files/read")
    assert any(w.path == "$.name" for w in result.warnings)


def test_openai_strict_mode():
    order = pydantic_tools()[0]
    strict = translate([order], "openai", strict=True).definitions[0]["function"]
    assert strict["strict"] is True
    for key, value in walk(strict["parameters"]):
        if key == "properties":
            pass
    params = strict["parameters"]
    assert params["additionalProperties"] is False and set(params["required"]) == set(params["properties"])
    assert "$defs" not in params and "$ref" not in json.dumps(params)
    mode = params["properties"]["mode"]
    assert "null" in json.dumps(mode)  # optional -> nullable
    merged = translate([hard_tools()[2]], "openai", strict=True)
    assert merged.definitions[0]["function"]["strict"] is False
    assert any("cannot be strict" in w.what for w in merged.warnings)


def test_gemini_rewrites_are_reported_and_arguments_map_back():
    result = translate(hard_tools(), "gemini")
    decls = {d["name"]: d for d in result.definitions[0]["function_declarations"]}
    fixed = decls["h_fixed" if "h_fixed" in decls else "fixed"]["parameters_json_schema"]
    assert fixed["properties"]["kind"] == {"enum": ["v1"]} and "$schema" not in fixed
    odd_name = next(n for n, owner in result.names.items() if owner == ("h", "odd.props"))
    odd = decls[odd_name]["parameters_json_schema"]
    assert set(odd["properties"]) == {"file_name", "a_b"} and odd["required"] == ["file_name"]
    assert result.arguments_back(odd_name, {"file_name": "x", "a_b": 1}) == {"file-name": "x", "a.b": 1}
    paths = {(w.tool, w.what) for w in result.warnings}
    assert ("h.fixed", "const turned into a one-value enum") in paths


def test_gemini_legacy_inlines_refs_and_flattens_nullable():
    result = translate(pydantic_tools() + hard_tools()[:2], "gemini-legacy")
    decls = result.definitions[0]["function_declarations"]
    place = decls[0]["parameters"]
    order = place["properties"]["order"]
    assert order["properties"]["ship_to"]["properties"]["city"] == {"type": "string", "nullable": True}
    assert any("recursive $ref" in w.what for w in result.warnings)
    assert any("oneOf" in w.what for w in result.warnings)


def test_title_and_annotations_are_folded_into_the_description():
    tool = Tool("h", "files_read", {"type": "object"}, description="Reads files.", title="File reader",
                annotations={"readOnlyHint": True, "openWorldHint": False})
    text = translate([tool], "anthropic").definitions[0]["description"]
    assert text.startswith("File reader. Reads files.") and "[read-only]" in text


def test_provider_limits_are_reported():
    tools = [Tool("s", f"t{i}", {"type": "object"}) for i in range(200)]
    for fmt in ("openai", "gemini"):
        assert any("more than 128" in w.what for w in translate(tools, fmt).warnings)
    assert not any("more than" in w.what for w in translate(tools, "anthropic").warnings)


def test_lint_covers_every_provider(real_tools):
    findings = lint(real_tools + hard_tools())
    assert {f.target for f in findings} >= {"openai", "gemini", "gemini-legacy"}
    assert all(f.tool and f.path.startswith("$") and f.why for f in findings)

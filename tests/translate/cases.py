"""Manifests the translation tests run on, and the checks every generated definition must pass:
each provider SDK's own types (offline) plus llmc's own name and schema checks, since the SDK
types check neither names nor schema contents."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmc_cli.model import Tool

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$")
LEGACY_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$")
GEMINI_PROPERTY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
GEMINI_REJECTS = {
    "$schema",
    "const",
    "not",
    "allOf",
    "if",
    "then",
    "else",
    "examples",
    "patternProperties",
    "definitions",
    "exclusiveMinimum",
    "exclusiveMaximum",
}
LEGACY_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required", "minItems", "maxItems"}
STRICT_FORBIDDEN = {"allOf", "not", "if", "then", "else", "oneOf", "patternProperties"}


def stored(name: str) -> list[Tool]:
    manifest = json.loads((MANIFESTS / f"{name}.json").read_text())
    return [Tool.from_mcp(name, raw) for raw in manifest["tools"]]


# -- an MCP SDK server's tools (pydantic: $defs/$ref, anyOf with null, enums, nested objects) --------


class Address(BaseModel):
    street: str
    city: str | None = None
    tags: dict[str, str] = Field(default_factory=dict, description="Free-form labels")


class Order(BaseModel):
    items: list[str] = Field(min_length=1)
    ship_to: Address
    priority: int | None = None


def sdk_tools() -> list[Tool]:
    """Generated in-process by `mcp.server.mcpserver.MCPServer.list_tools`."""
    import anyio
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="shop")

    @server.tool(description="Place an order.")
    def place(order: Order, mode: Literal["normal", "express"] = "normal", note: str | None = None) -> str:
        return "ok"

    @server.tool(title="Find orders", annotations=None)
    def find(customer_id: int, since: str | None = None, limit: int = 10) -> list[str]:
        """Orders of one customer."""
        return []

    raw = anyio.run(server.list_tools)
    return [Tool.from_mcp("shop", t.model_dump(mode="json", by_alias=True, exclude_none=True)) for t in raw]


# -- hand-written hard cases -----------------------------------------------------------------------

NODE = {
    "type": "object",
    "description": "A tree node",
    "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
    "required": ["value"],
}


def hard_tools() -> list[Tool]:
    return [
        Tool(
            "h",
            "tree",
            {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"], "$defs": {"Node": NODE}},
        ),
        Tool(
            "h",
            "shapes",
            {
                "type": "object",
                "properties": {
                    "shape": {
                        "oneOf": [
                            {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]},
                            {
                                "type": "object",
                                "properties": {"w": {"type": "number"}, "h": {"type": "number"}},
                                "required": ["w", "h"],
                            },
                        ]
                    }
                },
                "required": ["shape"],
            },
        ),
        Tool(
            "h",
            "merged",
            {
                "type": "object",
                "properties": {
                    "x": {
                        "allOf": [
                            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                            {"type": "object", "properties": {"b": {"type": "integer"}}},
                        ]
                    }
                },
            },
        ),
        Tool(
            "h",
            "fixed",
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "kind": {"const": "v1"},
                    "n": {"type": "integer", "exclusiveMinimum": 0},
                    "level": {"type": "integer", "enum": [1, 2, 3]},
                    "url": {"type": "string", "format": "uri"},
                },
            },
        ),
        Tool(
            "h",
            "odd.props",
            {
                "type": "object",
                "required": ["file-name"],
                "properties": {
                    "file-name": {"type": "string"},
                    "a.b": {"type": "integer"},
                    "a_b": {"type": "integer"},
                    "9lives": {"type": "object", "properties": {"x-y": {"type": "string"}}, "required": ["x-y"]},
                },
            },
        ),
        Tool("h", "files/read", {"type": "object"}, title="Read files", annotations={"readOnlyHint": True}),
        Tool("h", "files.read", {"type": "object"}, description="Also reads files.", annotations={"destructiveHint": True}),
        Tool("h", "files_read", {"type": "object", "properties": {}}),
        Tool("h", "x" * 80, {"type": "object", "properties": {"q": {"type": ["string", "null"]}}}),
        Tool(
            "h",
            "map",
            {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        ),
        Tool(
            "h",
            "draft7",
            {
                "type": "object",
                "definitions": {"D": {"type": "string"}},
                "required": ["missing", "any"],
                "properties": {
                    "any": {},
                    "yes": True,
                    "no": False,
                    "d": {"$ref": "#/definitions/D"},
                    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                    "mixed": {"enum": ["a", 1, None]},
                    "inner": {"$schema": "x", "type": "string"},
                    "pat": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
                },
            },
        ),
    ]


def many_tools(n: int = 200) -> list[Tool]:
    return [Tool(f"s{i % 3}", f"tool-{i}", {"type": "object", "properties": {"q": {"type": "string"}}}) for i in range(n)]


# -- checks ----------------------------------------------------------------------------------------


def subschemas(schema: Any, where: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object inside `schema`, with its path."""
    if not isinstance(schema, dict):
        return
    yield where, schema
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        for name, sub in (schema.get(key) or {}).items():
            yield from subschemas(sub, f"{where}.{key}.{name}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from subschemas(sub, f"{where}.{key}[{i}]")
    for key in ("items", "additionalProperties", "not"):
        yield from subschemas(schema.get(key), f"{where}.{key}")


def check_json_schema(schema: dict[str, Any]) -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)
    assert schema.get("type") == "object", schema


def check_strict(schema: dict[str, Any]) -> None:
    for where, node in subschemas(schema):
        assert not STRICT_FORBIDDEN & set(node), (where, node)
        if node.get("type") == "object" or "properties" in node:
            assert node["additionalProperties"] is False, where
            assert sorted(node["required"]) == sorted(node["properties"]), where


def validate(fmt: str, definitions: Any) -> None:
    """The SDK's own types, offline, then llmc's name and schema checks."""
    from pydantic import TypeAdapter

    if fmt == "openai":
        from openai.types.chat import ChatCompletionToolParam

        adapter = TypeAdapter(ChatCompletionToolParam)
        for d in definitions:
            adapter.validate_python(d)
            f = d["function"]
            assert OPENAI_NAME.match(f["name"]) and isinstance(f["strict"], bool)
            check_json_schema(f["parameters"])
            if f["strict"]:
                check_strict(f["parameters"])
    elif fmt == "openai-responses":
        from openai.types.responses import FunctionToolParam

        adapter = TypeAdapter(FunctionToolParam)
        for d in definitions:
            adapter.validate_python(d)
            assert OPENAI_NAME.match(d["name"]) and isinstance(d["strict"], bool) and "parameters" in d
            check_json_schema(d["parameters"])
            if d["strict"]:
                check_strict(d["parameters"])
    elif fmt == "anthropic":
        from anthropic.types import ToolParam

        adapter = TypeAdapter(ToolParam)
        for d in definitions:
            adapter.validate_python(d)
            assert OPENAI_NAME.match(d["name"]) and set(d) == {"name", "description", "input_schema"}
            check_json_schema(d["input_schema"])
    elif fmt in ("gemini", "gemini-legacy"):
        from google.genai import types

        assert len(definitions) == 1 and set(definitions[0]) == {"function_declarations"}
        types.Tool.model_validate(definitions[0])
        for d in definitions[0]["function_declarations"]:
            types.FunctionDeclaration.model_validate(d)
            if fmt == "gemini":
                assert GEMINI_NAME.match(d["name"]) and set(d) == {"name", "description", "parameters_json_schema"}
                schema = d["parameters_json_schema"]
                types.JSONSchema.model_validate(schema)  # the SDK's own JSON Schema model forbids unknown keys
                check_json_schema(schema)
                for where, node in subschemas(schema):
                    assert not GEMINI_REJECTS & set(node), (d["name"], where, node)
                    assert all(GEMINI_PROPERTY.match(p) for p in node.get("properties") or {}), (d["name"], where)
            else:
                assert LEGACY_NAME.match(d["name"]) and set(d) == {"name", "description", "parameters"}
                schema = d["parameters"]
                types.Schema.model_validate(schema)
                for where, node in subschemas(schema):
                    assert set(node) <= LEGACY_KEYS, (d["name"], where, node)
                    assert all(isinstance(v, str) for v in node.get("enum", [])), (d["name"], where)
                    assert not isinstance(node.get("type"), list), (d["name"], where)
                    assert all(GEMINI_PROPERTY.match(p) for p in node.get("properties") or {}), (d["name"], where)
                    assert set(node.get("required", [])) <= set(node.get("properties", {})), (d["name"], where)
    elif fmt == "text":
        assert isinstance(definitions, str)
    else:
        assert fmt == "mcp"

"""The quick check's one-loop path for schemas of scalar properties (mcp/validation.py
_flat_types): it passes only arguments the compiled subset check passes (and jsonschema
accepts), and leaves every other case to the path it had before, with the same verdicts and
the same errors."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from llmc_cli.errors import UsageError
from llmc_cli.mcp import validation
from llmc_cli.mcp.schema_subset import compile_check

FLAT = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "description": "text"},
        "i": {"type": "integer"},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
    },
    "required": ["s"],
}


class Text(str):
    pass


ARGUMENTS: list[Any] = [
    {"s": "x"},
    {"s": "x", "i": 1, "n": 2.5, "b": True},
    {"s": "x", "n": 3},
    {"s": "x", "i": True},  # a boolean is no integer
    {"s": "x", "i": 1.0},  # nor is 1.0 (the subset is stricter: jsonschema decides)
    {"s": "x", "n": False},
    {"s": 1},
    {"i": 1},  # a required name missing
    {"s": None},
    {"s": "x", "i": None},  # an optional null: left out
    {"s": Text("x")},  # a subclass: not JSON's own type, the path before decides
    {"s": "x", "extra": 1},  # not declared, not forbidden
    {},
]


def reference(arguments: dict[str, Any], schema: dict[str, Any], tool: str) -> bool | str:
    """passes_quickly's verdict before the one-loop path: the subset check on the arguments as checked."""
    properties = schema["properties"]
    for key in arguments:
        if key not in properties and schema.get("additionalProperties") is False:
            return "refused"
    checked = {k: v for k, v in arguments.items() if v is not None or k in schema.get("required", [])}
    check = compile_check(schema, exact=True)
    assert check is not None
    return check(checked, "") is None


@pytest.mark.parametrize("arguments", ARGUMENTS)
@pytest.mark.parametrize("closed", [False, True])
def test_the_flat_path_judges_as_the_subset_check(arguments: dict[str, Any], closed: bool) -> None:
    schema = {**FLAT, "additionalProperties": False} if closed else dict(FLAT)
    tool = f"t.flat{closed}"
    expected = reference(arguments, schema, tool)
    check = validation.quick_check(schema, tool)
    for _ in range(2):  # the schema's check made once, then taken again
        if expected == "refused":
            with pytest.raises(UsageError, match="unknown argument 'extra'"):
                check(arguments, tool)
        else:
            assert check(arguments, tool) is expected
            if expected:
                checked = {k: v for k, v in arguments.items() if v is not None}
                assert jsonschema.Draft202012Validator(schema).is_valid(checked)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"s": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"s": {"type": "string"}}, "minProperties": 2},
        {"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
        {"type": "object", "properties": {"s": {"type": "object"}}},
        {"type": "object", "properties": {"s": {"enum": ["ab"], "type": "string"}}},
    ],
)
def test_any_other_schema_takes_the_path_before(schema: dict[str, Any]) -> None:
    """Schemas that assert more than one scalar type a property have no one-loop path: "a" is
    refused wherever the schema says so, as before."""
    assert validation._flat_types(schema, schema["properties"], []) is None
    check = validation.quick_check(schema, "t.other")
    compiled = compile_check(schema, exact=True)
    expected = compiled is not None and compiled({"s": "a"}, "") is None
    assert check({"s": "a"}, "t.other") is expected

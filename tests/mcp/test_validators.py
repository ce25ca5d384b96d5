"""The validators seam (mcp/validation.py, mcp/schema_subset.py): one compiled validator per tool
definition, compiled again when the definition changes, bounded; the compiled subset never
accepts what jsonschema refuses; valid arguments of a common schema never import jsonschema."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import jsonschema
import jsonschema.validators
import pytest

from llmc_cli.errors import UsageError
from llmc_cli.mcp import validation
from llmc_cli.mcp.schema_subset import ASSERTIONS, SUBSET, compile_check
from llmc_cli.mcp.server import check_arguments
from llmc_cli.mcp.validation import SUBSET_CHECKS, VALIDATORS, CompiledSchemas, validate_arguments

COUNT = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0}, "label": {"type": "string"}},
    "required": ["n"],
}
# Outside the subset ($ref): jsonschema decides, through a cached validator.
REFERRING = {
    "type": "object",
    "$defs": {"n": {"type": "integer"}},
    "properties": {"n": {"$ref": "#/$defs/n"}},
    "required": ["n"],
}


def test_n_calls_of_one_tool_build_one_validator() -> None:
    before = SUBSET_CHECKS.built
    for i in range(200):
        validate_arguments({"n": i, "label": "x"}, dict(COUNT), "t.count_once")  # an equal copy each time
    assert SUBSET_CHECKS.built - before == 1


def test_n_calls_outside_the_subset_build_one_jsonschema_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[object] = []
    real = jsonschema.Draft202012Validator.check_schema

    def check_schema(cls: Any, schema: Any, **kw: Any) -> None:
        checked.append(schema)
        real(schema, **kw)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(check_schema))
    before = VALIDATORS.built
    for i in range(100):
        validate_arguments({"n": i}, REFERRING, "t.refers")
    with pytest.raises(UsageError, match=r"t\.refers: argument n: expected integer"):
        validate_arguments({"n": "one"}, REFERRING, "t.refers")
    assert VALIDATORS.built - before == 1
    assert len(checked) == 1  # the schema itself was checked once, not once per call


def test_a_changed_definition_builds_a_new_validator_and_drops_the_old() -> None:
    before, size = SUBSET_CHECKS.built, len(SUBSET_CHECKS)
    validate_arguments({"n": 1}, COUNT, "t.changes")
    validate_arguments({"n": 1}, COUNT, "t.changes")
    assert SUBSET_CHECKS.built - before == 1
    changed = {**COUNT, "properties": {"n": {"type": "string"}}}  # the server changed the tool
    validate_arguments({"n": "1"}, changed, "t.changes")
    assert SUBSET_CHECKS.built - before == 2
    with pytest.raises(UsageError, match="expected string, got 1"):
        validate_arguments({"n": 1}, changed, "t.changes")
    assert len(SUBSET_CHECKS) <= size + 1  # one entry for the tool, not one per definition seen


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    made: list[Any] = []

    def compile(schema: Any) -> int:
        made.append(schema)
        return len(made)

    cache: CompiledSchemas[int] = CompiledSchemas(compile, size=3)
    for name in "abcd":
        cache.get({"type": "string"}, owner=name)
    assert len(cache) == 3 and cache.built == 4
    cache.get({"type": "string"}, owner="d")  # still there
    cache.get({"type": "string"}, owner="a")  # was dropped: compiled again
    assert cache.built == 5


def test_the_built_in_servers_checks_compile_once_per_tool() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"]}
    made = [check_arguments(schema, {"path": "a"}, owner="read_it") for _ in range(50)]
    assert made == [None] * 50
    assert check_arguments(schema, {"path": ""}, owner="read_it") == "path must not be empty"
    assert check_arguments(schema, {}, owner="read_it") == "missing required argument 'path'"
    assert check_arguments(schema, {"path": "a", "x": 1}, owner="read_it") is None
    closed = {**schema, "additionalProperties": False}
    assert check_arguments(closed, {"path": "a", "x": 1}, owner="read_it") == "unknown argument 'x'"


def test_valid_arguments_of_a_common_schema_do_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from llmc_cli.mcp.validation import validate_arguments\n"
        "schema = {'type': 'object', 'properties': {'path': {'type': 'string', 'title': 'Path'},"
        " 'limit': {'anyOf': [{'type': 'integer', 'maximum': 9}, {'type': 'null'}], 'default': None}},"
        " 'required': ['path'], 'additionalProperties': False}\n"
        "validate_arguments({'path': 'a', 'limit': 3}, schema, 's.t')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'referencing')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_subset_knows_every_keyword_jsonschema_asserts() -> None:
    drafts = ("Draft3Validator", "Draft4Validator", "Draft6Validator", "Draft7Validator", "Draft201909Validator")
    asserted = set(jsonschema.Draft202012Validator.VALIDATORS)
    for name in drafts:
        asserted |= set(getattr(jsonschema.validators, name).VALIDATORS)
    assert asserted - {"format"} <= ASSERTIONS  # format asserts nothing without a format checker
    assert SUBSET <= ASSERTIONS


# (schema, instance): the compiled subset may refuse more than jsonschema, never accept more.
CASES: list[tuple[Any, Any]] = [
    ({"type": "integer"}, True),
    ({"type": "integer"}, 1.0),
    ({"type": "integer"}, 3),
    ({"type": "number"}, False),
    ({"type": ["string", "null"]}, None),
    ({"type": ["string", "null"]}, 0),
    ({"enum": [1, "a"]}, True),
    ({"enum": [1, "a"]}, 1.0),
    ({"enum": [[1], {"a": True}]}, [True]),
    ({"enum": [[1], {"a": True}]}, {"a": True}),
    ({"const": False}, 0),
    ({"const": 0}, False),
    ({"minLength": 2}, "é"),
    ({"maxLength": 1}, "ab"),
    ({"pattern": "^a+$"}, "aab"),
    ({"pattern": "b"}, "abc"),
    ({"minimum": 1.5}, 1),
    ({"maximum": 2}, 2),
    ({"minimum": 1}, "0"),
    ({"items": {"type": "string"}, "maxItems": 2}, ["a", 1]),
    ({"items": {"type": "string"}, "minItems": 1}, []),
    ({"required": ["a"], "properties": {"a": {"type": "object", "required": ["b"]}}}, {"a": {}}),
    ({"additionalProperties": {"type": "integer"}, "properties": {"s": {}}}, {"s": "x", "n": "1"}),
    ({"additionalProperties": False, "properties": {"s": {}}}, {"s": 1, "t": 2}),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 3}]}, "ab"),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 3}]}, "abc"),
    ({"type": "object", "properties": {"a": {"title": "A", "x-ui": 1, "format": "email"}}}, {"a": "not an email"}),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}, 1.0),
]


@pytest.mark.parametrize(("schema", "instance"), CASES)
def test_the_subset_never_accepts_what_jsonschema_refuses(schema: Any, instance: Any) -> None:
    check = compile_check(schema, exact=True)
    assert check is not None
    if check(instance, "") is None:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        assert cls(schema).is_valid(instance)


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [{"type": "string"}]},
        {"properties": {"a": {"$ref": "#/$defs/a"}}},
        {"items": [{"type": "string"}]},
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": "integer"},
        {"type": "strnig"},
        {"minimum": "1"},
        {"pattern": "("},
        {"properties": {"a": False}},
        {"exclusiveMinimum": 0, "type": "integer"},
    ],
)
def test_what_the_subset_does_not_cover_goes_to_jsonschema(schema: Any) -> None:
    assert compile_check(schema, exact=True) is None


def test_a_broken_schema_lets_the_call_go_ahead() -> None:
    validate_arguments({"n": 1}, {"type": "strnig"}, "t.broken")  # the server's business, not the user's
    assert validation.VALIDATORS.get({"type": "strnig"}) is None


def test_the_quick_path_judges_every_call_of_one_schema() -> None:
    """passes_quickly reads a schema once (by its identity) and every call's arguments afresh."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "label": {"type": "string"}}, "required": ["n"]}
    assert validation.passes_quickly({"n": 1}, schema, "t.quick")
    assert not validation.passes_quickly({"n": "one"}, schema, "t.quick")  # jsonschema decides
    assert validation.passes_quickly({"n": 2, "label": None}, schema, "t.quick")  # an optional null: left out
    assert not validation.passes_quickly({"n": None}, schema, "t.quick")  # a required one is not
    with pytest.raises(UsageError, match=r"t\.quick: unknown argument 'lable' \(did you mean 'label'\?\)"):
        validation.passes_quickly({"n": 3, "lable": "x"}, schema, "t.quick")
    assert validation.passes_quickly({"n": 4}, schema, "t.quick")
    with pytest.raises(UsageError, match=r"expected integer"):
        validate_arguments({"n": "two"}, schema, "t.quick")


def test_the_quick_path_tells_schemas_apart_whatever_their_tool() -> None:
    needs_a = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}
    needs_b = {**needs_a, "required": ["b"]}
    for _ in range(3):
        assert validation.passes_quickly({"a": "x"}, needs_a, "t.same")
        assert not validation.passes_quickly({"a": "x"}, needs_b, "t.same")
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    with pytest.raises(UsageError, match=r"unknown argument 'zzz' \(arguments: a\)"):
        validation.passes_quickly({"zzz": 1}, closed, "t.same")


def test_an_object_schema_is_one_check_with_the_same_words() -> None:
    schema = {"type": "object", "properties": {"cfg": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    check = compile_check(schema, exact=True)
    assert check is not None
    assert check("text", "") == "arguments must be of type object"
    assert check({"cfg": 1}, "") == "cfg must be of type object"
    assert check({"cfg": {"x": "s"}}, "") == "cfg.x must be of type integer"
    assert check({"cfg": {"x": 1}}, "") is None
    # with another keyword beside them, the checks stay apart, in their order (type first)
    enum = compile_check({"type": "object", "enum": [{"a": 1}], "properties": {"a": {}}}, exact=True)
    assert enum is not None and enum("text", "") == "arguments must be of type object"
    assert enum({"a": 2}, "") == "arguments must be one of {'a': 1}"

"""`plainly_valid` proves the usual arguments valid without importing jsonschema; it must never
say valid where jsonschema finds an error (False only sends the case on to jsonschema)."""

from __future__ import annotations

import itertools

import jsonschema
import pytest

from llmc_cli.cli.arguments import plainly_valid, validate_arguments
from llmc_cli.errors import UsageError

SCHEMAS = [
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 10}}},
    {"type": "object", "properties": {"x": {"type": "number"}, "flag": {"type": "boolean"}},
     "additionalProperties": False},
    {"type": "object", "properties": {"mode": {"type": "string", "enum": ["fast", "safe"]}}},
    {"type": "object", "properties": {"v": {"enum": [1, True, "1"]}, "c": {"const": "k"}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}},
    {"type": "object", "properties": {"s": {"type": ["string", "null"], "minLength": 2}}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "integer"}},
                                              "required": ["a"]}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"i": {"type": "integer"}}},
    {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a"}}},  # not plain: jsonschema decides
]
VALUES = ["hi", "", "x" * 3, 0, 5, 11, -1, 1.0, 2.5, True, False, None, [], ["a"], ["a", "b", "c"], [1],
          {}, {"a": 1}, {"a": "1"}, "fast", "slow", "k", 1, "1"]
KEYS = ["message", "n", "x", "flag", "mode", "v", "c", "tags", "s", "o", "i", "p", "other"]


def cases():
    for schema in SCHEMAS:
        yield schema, {}
        for key, value in itertools.product(KEYS, VALUES):
            yield schema, {key: value}
        yield schema, {"message": "hi", "n": 3, "mode": "safe"}


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_never_valid_where_jsonschema_finds_an_error(schema):
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    proved = 0
    for case_schema, value in cases():
        if case_schema is not schema:
            continue
        if plainly_valid(value, schema):
            proved += 1
            assert not list(validator.iter_errors(value)), (schema, value)
    if "pattern" not in str(schema):
        assert proved, "the plain path proves some of these valid"


def test_the_usual_call_is_proved_without_jsonschema():
    schema = {"type": "object", "properties": {"message": {"type": "string"}, "count": {"type": "integer"}},
              "required": ["message"]}
    assert plainly_valid({"message": "hi", "count": 2}, schema)
    assert not plainly_valid({"message": 1}, schema)  # jsonschema then writes the error
    with pytest.raises(UsageError, match="expected string"):
        validate_arguments({"message": 1}, schema, "t.echo")
    with pytest.raises(UsageError, match="missing required argument 'message'"):
        validate_arguments({"count": 2}, schema, "t.echo")

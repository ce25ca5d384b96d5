"""A JSON Schema compiled once into a checking function, for the subset of keywords that tool
schemas mostly use: type, enum, const, minLength, maxLength, pattern, minimum, maximum, minItems,
maxItems, items, properties, required, additionalProperties, anyOf.

Two uses, one compiler:
- the built-in server's own tools (mcp/server.py check_arguments): their schemas use only this
  subset, and keywords outside it are ignored (`exact=False`);
- a client's fast path in front of jsonschema (mcp/validation.py): with `exact=True` a schema that
  uses any other assertion keyword, or names a draft whose meaning differs, does not compile
  (None), and jsonschema decides. A compiled check is never more lenient than jsonschema: it is
  stricter in one place (an integer must be an int, 1.0 is refused), and anything it refuses goes
  to jsonschema for the verdict and the message, so only a check that passes is trusted.

A check returns the first problem as one line in the built-in server's words, or None.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[object, str], "str | None"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}

# Every keyword some draft of jsonschema asserts (the union of its validators' VALIDATORS, less
# `format`, which asserts nothing without a format checker): one of these outside SUBSET means
# jsonschema must decide. tests/mcp/test_validators.py keeps this list complete.
ASSERTIONS = frozenset(
    {
        "$dynamicRef", "$recursiveRef", "$ref", "additionalItems", "additionalProperties", "allOf",
        "anyOf", "const", "contains", "dependencies", "dependentRequired", "dependentSchemas",
        "disallow", "divisibleBy", "enum", "exclusiveMaximum", "exclusiveMinimum", "extends", "if",
        "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
        "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern", "patternProperties",
        "prefixItems", "properties", "propertyNames", "required", "type", "unevaluatedItems",
        "unevaluatedProperties", "uniqueItems",
    }
)  # fmt: skip
SUBSET = frozenset(
    {
        "type", "enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum",
        "minItems", "maxItems", "items", "properties", "required", "additionalProperties", "anyOf",
    }
)  # fmt: skip
# Drafts in which the subset means what it means in 2020-12 (draft 3's `required` does not).
_DRAFTS = {
    f"{base}{end}"
    for base in (
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    )
    for end in ("", "#")
}


class NotCompiled(Exception):
    """The schema uses something the subset does not cover (exact mode) or is malformed."""


def compile_check(schema: object, *, exact: bool) -> Check | None:
    """The schema as one checking function, or None when `exact` and it cannot be compiled."""
    try:
        return _compile(schema, exact)
    except NotCompiled:
        if exact:
            return None
        raise


def _accept(value: object, where: str) -> str | None:
    return None


def _compile(schema: object, exact: bool) -> Check:
    if schema is True:
        return _accept
    if not isinstance(schema, Mapping):
        raise NotCompiled("not a schema")  # `false`, or a malformed one: jsonschema decides
    if exact:
        unknown = (schema.keys() & ASSERTIONS) - SUBSET
        draft = schema.get("$schema")
        if unknown or (draft is not None and draft not in _DRAFTS):
            raise NotCompiled(", ".join(sorted(unknown)) or str(draft))
    built = (
        _type(schema),
        _enum(schema),
        _strings(schema),
        _numbers(schema),
        _arrays(schema, exact),
        _objects(schema, exact),
        _any_of(schema, exact),
    )
    checks = [check for check in built if check is not None]
    if len(checks) == 2 and built[0] is not None and built[5] is not None and schema.get("type") == "object":
        # an object's schema (a tool's inputSchema): its type checked by the object's own check,
        # one call a value where check_all, check_type and check_object were three
        return _objects(schema, exact, typed=True)  # type: ignore[return-value]  # (not None: built[5] is not)
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]

    def check_all(value: object, where: str) -> str | None:
        for check in checks:
            if problem := check(value, where):
                return problem
        return None

    return check_all


def _label(where: str) -> str:
    return where or "arguments"


def _type(schema: Mapping[str, Any]) -> Check | None:
    kind = schema.get("type")
    if kind is None:
        return None
    kinds = kind if isinstance(kind, list) else [kind]
    if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
        raise NotCompiled(f"type {kind!r}")
    allowed = tuple(t for k in kinds for t in _TYPES[k])
    numeric = any(k in ("integer", "number") for k in kinds) and "boolean" not in kinds
    name = " or ".join(kinds)

    def check_type(value: object, where: str) -> str | None:
        if isinstance(value, allowed) and not (numeric and isinstance(value, bool)):
            return None
        return f"{_label(where)} must be of type {name}"

    return check_type


def _same(a: object, b: object) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, containers compare by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    numbers = isinstance(a, (int, float)) and isinstance(b, (int, float))
    return (type(a) is type(b) or numbers) and a == b


def _enum(schema: Mapping[str, Any]) -> Check | None:
    if "const" in schema:
        const = schema["const"]

        def check_const(value: object, where: str) -> str | None:
            return None if _same(value, const) else f"{_label(where)} must be {const!r}"

        return check_const
    if "enum" not in schema:
        return None
    options = schema["enum"]
    if not isinstance(options, list):
        raise NotCompiled("enum")
    text = ", ".join(map(str, options))

    def check_enum(value: object, where: str) -> str | None:
        if any(_same(value, option) for option in options):
            return None
        return f"{_label(where)} must be one of {text}"

    return check_enum


def _bound(schema: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = schema.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
        raise NotCompiled(key)
    return value


def _strings(schema: Mapping[str, Any]) -> Check | None:
    shortest, longest = _bound(schema, "minLength", int), _bound(schema, "maxLength", int)
    pattern = _bound(schema, "pattern", str)
    if shortest is None and longest is None and pattern is None:
        return None
    try:
        regex = re.compile(pattern) if pattern is not None else None
    except re.error:
        raise NotCompiled("pattern") from None

    def check_string(value: object, where: str) -> str | None:
        if not isinstance(value, str):
            return None
        if shortest is not None and len(value) < shortest:
            return f"{_label(where)} must not be empty" if shortest == 1 else f"{_label(where)} needs {shortest}+ characters"
        if longest is not None and len(value) > longest:
            return f"{_label(where)} takes at most {longest} characters"
        if regex is not None and not regex.search(value):
            return f"{_label(where)} must match {pattern}"
        return None

    return check_string


def _numbers(schema: Mapping[str, Any]) -> Check | None:
    low, high = _bound(schema, "minimum", (int, float)), _bound(schema, "maximum", (int, float))
    if low is None and high is None:
        return None

    def check_number(value: object, where: str) -> str | None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if low is not None and value < low:
            return f"{_label(where)} must be >= {low}"
        if high is not None and value > high:
            return f"{_label(where)} must be <= {high}"
        return None

    return check_number


def _arrays(schema: Mapping[str, Any], exact: bool) -> Check | None:
    fewest, most = _bound(schema, "minItems", int), _bound(schema, "maxItems", int)
    if "items" in schema and isinstance(schema["items"], list):
        raise NotCompiled("items as a list")  # draft 2019-09 and earlier: per-position schemas
    each = _compile(schema["items"], exact) if "items" in schema else None
    if fewest is None and most is None and each is None:
        return None

    def check_array(value: object, where: str) -> str | None:
        if not isinstance(value, list):
            return None
        if fewest is not None and len(value) < fewest:
            return f"{_label(where)} needs at least {fewest} item(s)"
        if most is not None and len(value) > most:
            return f"{_label(where)} takes at most {most} items"
        if each is not None:
            label = _label(where)
            for i, item in enumerate(value):
                if problem := each(item, f"{label}[{i}]"):
                    return problem
        return None

    return check_array


def _objects(schema: Mapping[str, Any], exact: bool, typed: bool = False) -> Check | None:
    """The check of properties, required and additionalProperties; `typed`: of type "object" too."""
    props, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, Mapping) or not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        raise NotCompiled("properties or required")
    checks = {name: _compile(sub, exact) for name, sub in props.items()}
    forbid = extra is False  # additionalProperties: false
    rest = None if isinstance(extra, bool) else _compile(extra, exact)
    if not checks and not required and rest is None and not forbid:
        return None

    def check_object(value: object, where: str) -> str | None:
        if not isinstance(value, dict):
            return f"{_label(where)} must be of type object" if typed else None  # _type's words
        for name in required:
            if name not in value:
                return f"missing required argument '{name}'"
        for name, item in value.items():
            check = checks.get(name, rest)
            if check is None and forbid and name not in checks:
                return f"unknown argument '{name}'"
            if check is not None and (problem := check(item, name if not where else f"{where}.{name}")):
                return problem
        return None

    return check_object


def _any_of(schema: Mapping[str, Any], exact: bool) -> Check | None:
    if "anyOf" not in schema:
        return None
    options = schema["anyOf"]
    if not isinstance(options, list) or not options:
        raise NotCompiled("anyOf")
    checks = [_compile(option, exact) for option in options]

    def check_any(value: object, where: str) -> str | None:
        problems = [check(value, where) for check in checks]
        if all(problems):
            return problems[0]
        return None

    return check_any

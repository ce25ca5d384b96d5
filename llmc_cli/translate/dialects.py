"""The schema rewrites of each provider dialect: OpenAI strict mode, Gemini's JSON Schema subset,
and the OpenAPI subset of older Gemini/Vertex SDKs (gemini-legacy). Built on schema.py's walks."""

from __future__ import annotations

import json
from typing import Any

from .findings import Path, Report
from .names import property_names
from .schema import (
    SUBSCHEMA_KEYS,
    Schema,
    at,
    drop_schema_keyword,
    fold_into_description,
    inline_refs,
    is_null,
    map_children,
    merge_all_of,
    rebuild,
    resolve,
)

# -- OpenAI strict mode ----------------------------------------------------------------------------

STRICT_BLOCKED = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
)
STRICT_BLOCKED_SET = frozenset(STRICT_BLOCKED)
TYPED_KEYS = frozenset(("type", "anyOf", "$ref", "enum", "const", *STRICT_BLOCKED))  # any of them: not "any value"


def nullable(schema: Any) -> Any:
    """`schema` that also accepts null: ["T","null"] when it has one type, else anyOf with null."""
    if not isinstance(schema, dict) or schema is True:
        return schema
    kind = schema.get("type")
    if "$ref" in schema or "const" in schema or not (isinstance(kind, (str, list)) or "anyOf" in schema):
        return {"anyOf": [schema, {"type": "null"}]}
    out = dict(schema)
    if isinstance(kind, str) and kind != "null":
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    if "anyOf" in out and not any(is_null(s) for s in out["anyOf"]):
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def openai_strict(schema: Schema, report: Report, path: Path) -> Schema | None:
    """The strict-mode form of an object schema: `additionalProperties: false` on every object,
    every property required, the optional ones nullable. `$ref`/`$defs` stay (strict mode allows
    them). None, with one finding per obstacle, when the tool cannot be strict."""
    blockers: list[tuple[Path, str]] = []
    rewrites: list[tuple[Path, str, str]] = []

    def walk(node: object, where: Path, expanding: tuple[str, ...] = ()) -> Any:
        if isinstance(node, bool):
            blockers.append((where, f"it is the boolean schema {str(node).lower()}"))
        if not isinstance(node, dict):
            return node
        fresh = "$schema" in node  # node is our own copy, free to change before map_children copies it
        if fresh:
            node = {k: v for k, v in node.items() if k != "$schema"}
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:  # strict mode takes a bare $ref only
            target = resolve(schema, ref)
            if target is None:
                blockers.append((where, f"its $ref {ref} cannot be resolved"))
            elif ref in expanding:
                rewrites.append((where, f"keywords beside the recursive $ref {ref} dropped", "strict mode takes a bare $ref"))
                return {"$ref": ref}
            else:
                node, fresh = {**target, **{k: v for k, v in node.items() if k != "$ref"}}, True
                expanding += (ref,)
        if not STRICT_BLOCKED_SET.isdisjoint(node):
            blockers.extend((at(where, k), f"it uses {k}") for k in STRICT_BLOCKED if k in node)
        if "oneOf" in node:  # before the children are walked, so their paths say anyOf
            node = node if fresh else dict(node)
            node["anyOf"] = node.pop("oneOf")
            rewrites.append((at(where, "oneOf"), "oneOf turned into anyOf", "strict mode has no oneOf"))
        node = map_children(node, where, walk, expanding)
        if "default" in node and node["default"] is None:  # meaningless once null is allowed
            del node["default"]
        if not _strict_object(node, where, where is path, blockers) and TYPED_KEYS.isdisjoint(node):
            blockers.append((where, "it accepts any value (no type)"))
        return node

    result: Schema = walk(schema, path)  # an object root stays an object
    for where, reason in blockers:
        report.note(where, "cannot be strict: " + reason, "OpenAI strict mode does not support this; sent non-strict")
    if blockers:
        return None
    for where, what, why in rewrites:
        report.note(where, what, why)
    return result


def _strict_object(node: Schema, where: Path, root: bool, blockers: list[tuple[Path, str]]) -> bool:
    """An object node (our own copy) in strict form: every property required, the optional ones
    nullable, no other keys. False when the node is not an object."""
    kind = node.get("type")
    if not (kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node):
        return False
    extra = node.get("additionalProperties")
    if extra not in (None, False):
        blockers.append((at(where, "additionalProperties"), "it has keys of any name"))
    elif "properties" not in node and not root:
        blockers.append((where, "it is an object with no declared properties"))
    props = node.get("properties") or {}
    required = set(node.get("required") or [])
    node["properties"] = {k: v if k in required else nullable(v) for k, v in props.items()}
    node["required"] = list(props)
    node["additionalProperties"] = False
    return True


# -- Gemini ----------------------------------------------------------------------------------------

# Exactly the fields of google-genai's `types.JSONSchema` (extra keys forbidden there), which the
# tests validate every `parameters_json_schema` with.
GEMINI_KEYS = {
    "$defs",
    "$ref",
    "additionalProperties",
    "anyOf",
    "default",
    "description",
    "enum",
    "format",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "oneOf",
    "pattern",
    "properties",
    "required",
    "title",
    "type",
    "uniqueItems",
}
PROPERTY_WHY = "Gemini property names allow letters, digits and _ only (at most 64, not starting with a digit)"


def rename_properties(node: object, path: Path, report: Report) -> Any:
    """Property names made Gemini-legal everywhere (also inside `$defs`), `required` to match."""
    if not isinstance(node, dict) or SUBSCHEMA_KEYS.isdisjoint(node):  # a leaf has no properties
        return node
    out = rebuild(node, path, rename_properties, report)
    props = out.get("properties")
    if isinstance(props, dict):
        new = property_names(props)
        renamed = [(old, name) for old, name in new.items() if old != name]
        if renamed:
            for old, name in renamed:
                report.note(at(at(path, "properties"), old), f"property {old!r} renamed to {name!r}", PROPERTY_WHY)
            out = dict(out) if out is node else out
            out["properties"] = {new[k]: v for k, v in props.items()}
            if isinstance(out.get("required"), list):
                out["required"] = [new.get(k, k) for k in out["required"]]
    return out


def gemini_json(schema: Schema, report: Report, path: Path) -> Schema:
    """`parameters_json_schema` Gemini accepts: legal property names, `const` as a one-value
    enum, `allOf` merged, draft-7 `definitions` as `$defs`, other keywords dropped (constraints
    kept as words in the description)."""
    schema = rename_properties(drop_schema_keyword(schema), path, report)
    if "definitions" in schema:
        schema = json.loads(json.dumps(schema).replace('"#/definitions/', '"#/$defs/'))
        schema["$defs"] = {**schema.pop("definitions"), **schema.get("$defs", {})}
        report.note(at(path, "definitions"), "definitions moved to $defs", "Gemini reads $defs")

    root: Schema = _gemini(schema, path, report)  # an object root stays an object
    return root


def _gemini(node: object, where: Path, report: Report) -> Any:
    """One node of gemini_json (a fresh dict), then its subschemas."""
    if isinstance(node, bool):  # Gemini wants schema objects, not JSON Schema's true/false
        if node is False:
            report.note(
                where, "a schema that allows nothing replaced by one that allows anything", "Gemini has no boolean schemas"
            )
        return {}
    if not isinstance(node, dict):
        return node
    if "allOf" in node:
        node = merge_all_of(node, report, where)
    if "const" in node:
        node = {**{k: v for k, v in node.items() if k != "const"}, "enum": [node["const"]]}
        report.note(at(where, "const"), "const turned into a one-value enum", "Gemini has no const")
    node = keep_only(node, GEMINI_KEYS, report, where, "Gemini rejects or ignores it")
    return map_children(node, where, _gemini, report)


def keep_only(node: Schema, allowed: set[str], report: Report, where: Path, why: str) -> Schema:
    """`node` without the keywords outside `allowed`; scalar constraints move into the description."""
    if node.keys() <= allowed:
        return node  # nothing to drop (the usual case): the caller copies what it changes
    out: Schema = {}
    folded: dict[str, Any] = {}
    for key, value in node.items():  # one pass: the findings in the node's key order
        if key in allowed:
            out[key] = value
        elif isinstance(value, (dict, list)) or key in ("$schema", "$id", "$comment"):
            report.note((where, key), f"{key} dropped", why)
        else:
            folded[key] = value
            report.note((where, key), f"{key} moved into the description", why)
    if "description" in allowed:
        fold_into_description(out, folded)
    return out


# -- gemini-legacy: the OpenAPI subset -------------------------------------------------------------

LEGACY_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required", "minItems", "maxItems"}
LEGACY_FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}
LEGACY_WHY = "not in the OpenAPI subset older Gemini/Vertex SDKs accept"


def openapi_subset(schema: Schema, report: Report, path: Path) -> Schema:
    """The OpenAPI subset (type, format, description, nullable, enum of strings, items,
    properties, required, min/maxItems): `$ref` inlined, anyOf-with-null as `nullable`, other
    unions and keywords dropped with a finding, constraints kept as words in the description.
    Schema `title`s and null defaults go without a finding: labels, not constraints."""
    schema = rename_properties(drop_schema_keyword(schema), path, report)
    schema = inline_refs(schema, schema, report, path)

    root: Schema = _subset(schema, path, report)  # an object root stays an object
    return root


def _subset(node: Any, where: Path, report: Report) -> Any:
    """One node of openapi_subset (a fresh dict), then its items and properties."""
    if not isinstance(node, dict):
        return {}
    node = dict(node)
    if "allOf" in node:
        node = merge_all_of(node, report, where)
    if "anyOf" in node or "oneOf" in node:
        node = _unions(node, where, report)
    _one_type(node, where, report)
    _string_enum(node, where, report)
    _legacy_format_and_items(node, where, report)
    # Dropped without a finding: a schema `title` is a label generators derive from the
    # property name (pydantic's "Street" for `street`), and a null default says no more
    # than `nullable`.
    if "title" in node:
        del node["title"]
    if "default" in node and node["default"] is None:
        del node["default"]
    node = keep_only(node, LEGACY_KEYS, report, where, LEGACY_WHY)
    if isinstance(node.get("items"), dict):
        node["items"] = _subset(node["items"], (where, "items"), report)
    if isinstance(node.get("properties"), dict):
        props = (where, "properties")
        node["properties"] = {k: _subset(v, (props, k), report) for k, v in node["properties"].items()}
        if isinstance(node.get("required"), list):
            node["required"] = [k for k in node["required"] if k in node["properties"]]
    return node


def _one_type(node: Schema, where: Path, report: Report) -> None:
    """A list of types (our own copy): null as `nullable`, one other type kept, several dropped."""
    kind = node.get("type")
    if not isinstance(kind, list):
        return
    kinds = [k for k in kind if k != "null"]
    if len(kinds) < len(kind):
        node["nullable"] = True
    node.pop("type")
    if len(kinds) == 1:
        node["type"] = kinds[0]
    elif kinds:
        fold_into_description(node, {"type": kinds})
        report.note(at(where, "type"), f"type {kinds} dropped: any value accepted", "the OpenAPI subset has one type")


def _string_enum(node: Schema, where: Path, report: Report) -> None:
    """const as a one-value enum; null in an enum as `nullable`; an enum not all strings moved
    into the description."""
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" not in node:
        return
    values = [v for v in node["enum"] if v is not None]
    if None in node["enum"]:
        node["nullable"] = True
    if values and all(isinstance(v, str) for v in values):
        node["enum"] = values
        node.setdefault("type", "string")
    else:
        del node["enum"]
        fold_into_description(node, {"one of": values})
        report.note(at(where, "enum"), "enum moved into the description", "the OpenAPI subset takes string enums only")


def _legacy_format_and_items(node: Schema, where: Path, report: Report) -> None:
    """A format the OpenAPI subset lacks for the type moved into the description; an array
    without an items schema described as strings."""
    fmt = node.get("format")
    if fmt is not None and fmt not in LEGACY_FORMATS.get(node.get("type", ""), ()):
        del node["format"]
        fold_into_description(node, {"format": fmt})
        report.note(at(where, "format"), "format moved into the description", f"{LEGACY_WHY} for this type")
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        node["items"] = {"type": "string"}
        report.note(
            at(where, "items"), "array items of unknown type described as strings", "the OpenAPI subset needs an items schema"
        )


def _unions(node: Schema, where: Path, report: Report) -> Schema:
    """`node` (our own copy) with anyOf/oneOf resolved: null options as `nullable`, a single
    other option merged in, several kept as words in the description."""
    for union in ("anyOf", "oneOf"):
        if isinstance(node.get(union), list):
            options = node.pop(union)
            rest = [o for o in options if not is_null(o)]
            if len(rest) < len(options):
                node["nullable"] = True
            if len(rest) == 1 and isinstance(rest[0], dict):
                node = {**rest[0], **node}
            elif rest:
                rest_kinds = {json.dumps(o.get("type")) for o in rest if isinstance(o, dict)}
                if len(rest_kinds) == 1 and "type" not in node and isinstance(rest[0].get("type"), str):
                    node["type"] = rest[0]["type"]  # at least the type all options share
                fold_into_description(node, {union: rest})
                report.note(
                    at(where, union),
                    f"{union} of {len(rest)} options dropped (kept as words in the description)",
                    "the OpenAPI subset has no unions",
                )
    return node

"""JSON-Schema rewrites per provider dialect. Pure functions over plain dicts: the input is never
modified, and every loss or rewrite is noted on the Report the caller passes in.

Paths in findings point into the generated definition (e.g. `$.parameters.properties.mode`).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from .findings import Report
from .names import property_names

Schema = dict[str, Any]

# Keywords whose value is a subschema, a list of them, or a map of them (JSON Schema 2020-12 and
# draft 7, which MCP servers still emit).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
              "unevaluatedProperties", "unevaluatedItems")
MAX_REF_DEPTH = 16  # a chain of $refs deeper than this is treated as recursive
MAX_INLINED = 500  # $ref expansions per schema, so a wide web of definitions cannot explode the output


def at(path: str, key: str) -> str:
    """`path.key`, or `path['key']` when the key would make the path ambiguous."""
    return f"{path}.{key}" if key.replace("_", "a").replace("$", "a").isalnum() else f"{path}[{json.dumps(key)}]"


def map_children(node: Schema, path: str, fn: Callable[[Any, str], Any]) -> Schema:
    """A copy of `node` with `fn(child, path)` applied to every direct subschema."""
    out: Schema = {}
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: fn(v, at(at(path, key), k)) for k, v in value.items()}
        elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [fn(v, f"{at(path, key)}[{i}]") for i, v in enumerate(value)]
        elif key in SCHEMA_ONE and isinstance(value, dict):
            out[key] = fn(value, at(path, key))
        else:
            out[key] = value
    return out


def resolve(root: Schema, ref: str) -> Schema | None:
    """The local target of `ref` (a JSON pointer such as `#/$defs/Node`), copied, or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return copy.deepcopy(node) if isinstance(node, dict) else None


def inline_refs(node: Any, root: Schema, report: Report, path: str) -> Any:
    """`node` with every local `$ref` replaced by its target and `$defs` removed. A recursive
    reference degrades to a permissive schema of the target's type, with a finding; so does any
    reference past MAX_INLINED expansions (a server's schema must not blow up the output)."""
    budget = [MAX_INLINED]

    def walk(node: Any, path: str, seen: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            target = resolve(root, ref)
            if target is None:
                report.note(path, f"unresolvable $ref {ref} dropped", "only local references can be inlined")
                return walk(rest, path, seen)
            if ref in seen or len(seen) >= MAX_REF_DEPTH or budget[0] <= 0:
                kind = target.get("type") if isinstance(target.get("type"), str) else "object"
                why = "it is recursive" if ref in seen else "the schema grows too large when inlined"
                report.note(path, f"$ref {ref} replaced by any {kind}", f"this dialect has no references and {why}")
                return {"type": kind, **{k: v for k, v in rest.items() if k == "description"}}
            budget[0] -= 1
            return walk({**target, **rest}, path, seen + (ref,))
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}  # all inlined now
        return map_children(node, path, lambda child, p: walk(child, p, seen))

    return walk(node, path, ())


def prepare(schema: Schema, report: Report, path: str) -> Schema:
    """What every target starts from: an object at the root (every provider wants one), and
    draft-7 tuples (`items: [...]`) spelt the JSON Schema 2020-12 way (`prefixItems`)."""
    if schema.get("type") != "object":
        if "type" not in schema and not any(k in schema for k in SCHEMA_LISTS):
            report.note(at(path, "type"), '"type": "object" added', "providers require an object root")
            schema = {"type": "object", **schema}
        else:
            report.note(path, "root schema is not an object: replaced by an object with no properties",
                        "providers require an object root")
            return {"type": "object", "properties": {}}
    return modernise(schema, report, path)


def modernise(node: Any, report: Report, path: str) -> Any:
    if not isinstance(node, dict):
        return node
    out = map_children(node, path, lambda child, p: modernise(child, report, p))
    if isinstance(out.get("items"), list):
        out["prefixItems"] = out.pop("items")
        if isinstance(out.get("additionalItems"), (dict, bool)):
            out["items"] = out.pop("additionalItems")
        report.note(at(path, "items"), "tuple items written as prefixItems", "JSON Schema 2020-12 spells tuples so")
    return out


def drop_schema_keyword(schema: Schema) -> Schema:
    # Not a finding: the dialect marker says nothing the model or the API needs, so nothing is lost.
    return {k: v for k, v in schema.items() if k != "$schema"}


def fold_into_description(node: Schema, extra: dict[str, Any]) -> None:
    """Constraints a dialect cannot express, kept as words the model can still read."""
    if extra:
        words = "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in extra.items())
        node["description"] = f"{node['description']} ({words})" if node.get("description") else f"({words})"


def merge_all_of(node: Schema, report: Report, path: str) -> Schema:
    """`allOf` folded into one schema: properties and required united, other keys first wins."""
    merged = {k: v for k, v in node.items() if k != "allOf"}
    for part in node.get("allOf") or []:
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**value, **merged.get("properties", {})}
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    report.note(at(path, "allOf"), "allOf merged into one schema", "this dialect has no allOf")
    return merged


def is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def accepts_null(schema: Any, root: Schema, depth: int = 0) -> bool:
    """Whether `schema` lets `null` through (used to undo strict mode's added nulls)."""
    if schema is True or not isinstance(schema, dict) or depth > MAX_REF_DEPTH:
        return schema is True
    if isinstance(schema.get("$ref"), str):
        target = resolve(root, schema["$ref"])
        return target is not None and accepts_null(target, root, depth + 1)
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or schema.get("nullable") is True:
        return True
    if None in (schema.get("enum") or []) or ("const" in schema and schema["const"] is None):
        return True
    if any(accepts_null(s, root, depth + 1) for k in ("anyOf", "oneOf") for s in schema.get(k) or []):
        return True
    return not any(k in schema for k in ("type", "enum", "const", "anyOf", "oneOf", "allOf", "properties"))


# -- OpenAI strict mode ----------------------------------------------------------------------------

STRICT_BLOCKED = ("allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                  "patternProperties", "unevaluatedProperties")


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


def openai_strict(schema: Schema, report: Report, path: str) -> Schema | None:
    """The strict-mode form of an object schema: `additionalProperties: false` on every object,
    every property required, the optional ones nullable. `$ref`/`$defs` stay (strict mode allows
    them). None, with one finding per obstacle, when the tool cannot be strict."""
    blockers: list[tuple[str, str]] = []
    rewrites: list[tuple[str, str, str]] = []

    def walk(node: Any, where: str, expanding: tuple[str, ...] = ()) -> Any:
        if isinstance(node, bool):
            blockers.append((where, f"it is the boolean schema {str(node).lower()}"))
        if not isinstance(node, dict):
            return node
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
                node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
                expanding += (ref,)
        blockers.extend((at(where, k), f"it uses {k}") for k in STRICT_BLOCKED if k in node)
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
            rewrites.append((at(where, "oneOf"), "oneOf turned into anyOf", "strict mode has no oneOf"))
        if "default" in node and node["default"] is None:  # meaningless once null is allowed
            del node["default"]
        node = map_children(node, where, lambda child, p: walk(child, p, expanding))
        kind = node.get("type")
        if kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node:
            extra = node.get("additionalProperties")
            if extra not in (None, False):
                blockers.append((at(where, "additionalProperties"), "it has keys of any name"))
            elif "properties" not in node and where != path:
                blockers.append((where, "it is an object with no declared properties"))
            props = node.get("properties") or {}
            required = set(node.get("required") or [])
            node["properties"] = {k: v if k in required else nullable(v) for k, v in props.items()}
            node["required"] = list(props)
            node["additionalProperties"] = False
        elif not any(k in node for k in ("type", "anyOf", "$ref", "enum", "const", *STRICT_BLOCKED)):
            blockers.append((where, "it accepts any value (no type)"))
        return node

    result = walk(schema, path)
    for where, reason in blockers:
        report.note(where, "cannot be strict: " + reason, "OpenAI strict mode does not support this; sent non-strict")
    if blockers:
        return None
    for where, what, why in rewrites:
        report.note(where, what, why)
    return result


# -- Gemini ----------------------------------------------------------------------------------------

# Exactly the fields of google-genai's `types.JSONSchema` (extra keys forbidden there), which the
# tests validate every `parameters_json_schema` with.
GEMINI_KEYS = {"$defs", "$ref", "additionalProperties", "anyOf", "default", "description", "enum", "format",
               "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
               "minProperties", "minimum", "oneOf", "pattern", "properties", "required", "title", "type",
               "uniqueItems"}
PROPERTY_WHY = "Gemini property names allow letters, digits and _ only (at most 64, not starting with a digit)"


def rename_properties(node: Any, report: Report, path: str) -> Any:
    """Property names made Gemini-legal everywhere (also inside `$defs`), `required` to match."""
    if not isinstance(node, dict):
        return node
    out = map_children(node, path, lambda child, p: rename_properties(child, report, p))
    props = out.get("properties")
    if isinstance(props, dict):
        new = property_names(props)
        for old, name in new.items():
            if old != name:
                report.note(at(at(path, "properties"), old), f"property {old!r} renamed to {name!r}", PROPERTY_WHY)
        out["properties"] = {new[k]: v for k, v in props.items()}
        if isinstance(out.get("required"), list):
            out["required"] = [new.get(k, k) for k in out["required"]]
    return out


def gemini_json(schema: Schema, report: Report, path: str) -> Schema:
    """`parameters_json_schema` Gemini accepts: legal property names, `const` as a one-value
    enum, `allOf` merged, draft-7 `definitions` as `$defs`, other keywords dropped (constraints
    kept as words in the description)."""
    schema = rename_properties(drop_schema_keyword(schema), report, path)
    if "definitions" in schema:
        schema = json.loads(json.dumps(schema).replace('"#/definitions/', '"#/$defs/'))
        schema["$defs"] = {**schema.pop("definitions"), **schema.get("$defs", {})}
        report.note(at(path, "definitions"), "definitions moved to $defs", "Gemini reads $defs")

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, bool):  # Gemini wants schema objects, not JSON Schema's true/false
            if node is False:
                report.note(where, "a schema that allows nothing replaced by one that allows anything",
                            "Gemini has no boolean schemas")
            return {}
        if not isinstance(node, dict):
            return node
        if "allOf" in node:
            node = merge_all_of(node, report, where)
        if "const" in node:
            node = {**{k: v for k, v in node.items() if k != "const"}, "enum": [node["const"]]}
            report.note(at(where, "const"), "const turned into a one-value enum", "Gemini has no const")
        node = keep_only(node, GEMINI_KEYS, report, where, "Gemini rejects or ignores it")
        return map_children(node, where, walk)

    return walk(schema, path)


def keep_only(node: Schema, allowed: set[str], report: Report, where: str, why: str) -> Schema:
    """`node` without the keywords outside `allowed`; scalar constraints move into the description."""
    out = {k: v for k, v in node.items() if k in allowed}
    folded = {k: v for k, v in node.items()
              if k not in allowed and not isinstance(v, (dict, list)) and k not in ("$schema", "$id", "$comment")}
    for key in node:
        if key not in allowed:
            what = f"{key} moved into the description" if key in folded else f"{key} dropped"
            report.note(at(where, key), what, why)
    if "description" in allowed:
        fold_into_description(out, folded)
    return out


# -- gemini-legacy: the OpenAPI subset -------------------------------------------------------------

LEGACY_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required",
               "minItems", "maxItems"}
LEGACY_FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}
LEGACY_WHY = "not in the OpenAPI subset older Gemini/Vertex SDKs accept"


def openapi_subset(schema: Schema, report: Report, path: str) -> Schema:
    """The OpenAPI subset (type, format, description, nullable, enum of strings, items,
    properties, required, min/maxItems): `$ref` inlined, anyOf-with-null as `nullable`, other
    unions and keywords dropped with a finding, constraints kept as words in the description.
    Schema `title`s and null defaults go without a finding: labels, not constraints."""
    schema = rename_properties(drop_schema_keyword(schema), report, path)
    schema = inline_refs(schema, schema, report, path)

    def walk(node: Any, where: str) -> Any:
        if not isinstance(node, dict):
            return {}
        node = dict(node)
        if "allOf" in node:
            node = merge_all_of(node, report, where)
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
                    report.note(at(where, union), f"{union} of {len(rest)} options dropped (kept as words in the description)",
                                "the OpenAPI subset has no unions")
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) < len(kind):
                node["nullable"] = True
            node.pop("type")
            if len(kinds) == 1:
                node["type"] = kinds[0]
            elif kinds:
                fold_into_description(node, {"type": kinds})
                report.note(at(where, "type"), f"type {kinds} dropped: any value accepted", "the OpenAPI subset has one type")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "enum" in node:
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
        fmt = node.get("format")
        if fmt is not None and fmt not in LEGACY_FORMATS.get(node.get("type"), ()):
            del node["format"]
            fold_into_description(node, {"format": fmt})
            report.note(at(where, "format"), "format moved into the description", f"{LEGACY_WHY} for this type")
        if node.get("type") == "array" and not isinstance(node.get("items"), dict):
            node["items"] = {"type": "string"}
            report.note(at(where, "items"), "array items of unknown type described as strings",
                        "the OpenAPI subset needs an items schema")
        # Dropped without a finding: a schema `title` is a label generators derive from the
        # property name (pydantic's "Street" for `street`), and a null default says no more
        # than `nullable`.
        node.pop("title", None)
        if "default" in node and node["default"] is None:
            del node["default"]
        node = keep_only(node, LEGACY_KEYS, report, where, LEGACY_WHY)
        if isinstance(node.get("items"), dict):
            node["items"] = walk(node["items"], at(where, "items"))
        if isinstance(node.get("properties"), dict):
            node["properties"] = {k: walk(v, at(at(where, "properties"), k)) for k, v in node["properties"].items()}
            if isinstance(node.get("required"), list):
                node["required"] = [k for k in node["required"] if k in node["properties"]]
        return node

    return walk(schema, path)


# -- arguments back --------------------------------------------------------------------------------


def restore_arguments(value: Any, schema: Any, root: Schema, *, renamed: bool, drop_nulls: bool, depth: int = 0) -> Any:
    """A model's arguments in the server's terms: Gemini property names mapped back to the
    originals (`renamed`), and nulls strict mode allowed for optional properties removed
    (`drop_nulls`) where the original schema does not accept null. Walks the original schema."""
    if depth > 64 or not isinstance(schema, dict):
        return value
    if isinstance(value, list):
        items = next((b["items"] for b in _branches(schema, root) if isinstance(b.get("items"), dict)), None)
        return [restore_arguments(v, items, root, renamed=renamed, drop_nulls=drop_nulls, depth=depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    props: dict[str, Any] = {}
    back: dict[str, str] = {}
    required: set[str] = set()
    for branch in _branches(schema, root):  # union members are renamed one by one, so merge them
        branch_props = branch.get("properties")
        if isinstance(branch_props, dict):
            for old, sub in branch_props.items():
                props.setdefault(old, sub)
            for old, new in property_names(branch_props).items():
                back.setdefault(new, old)
        required.update(branch.get("required") or [])
    extra = schema.get("additionalProperties")
    out = {}
    for key, item in value.items():
        name = back[key] if renamed and key in back else key
        sub = props.get(name, extra)
        if drop_nulls and item is None and name in props and name not in required and not accepts_null(sub, root):
            continue
        out[name] = restore_arguments(item, sub, root, renamed=renamed, drop_nulls=drop_nulls, depth=depth + 1)
    return out


def _branches(schema: Schema, root: Schema, depth: int = 0) -> list[Schema]:
    """`schema` and what it stands for: its `$ref` target and union members, recursively
    (bounded in depth and, by MAX_INLINED, in count)."""
    if depth > MAX_REF_DEPTH:
        return []
    out = [schema]
    if isinstance(schema.get("$ref"), str):
        target = resolve(root, schema["$ref"])
        if target is not None:
            out += _branches(target, root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or []:
            if isinstance(member, dict) and len(out) < MAX_INLINED:
                out += _branches(member, root, depth + 1)
    return out

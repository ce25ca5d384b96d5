"""JSON-Schema rewrites shared by every provider dialect ($ref inlining, modernising, allOf merging)
and the way a model's arguments go back to the server's terms; each dialect's own rewrites are in
dialects.py. Pure functions over plain dicts: the input is never modified, and every loss or
rewrite is noted on the Report the caller passes in.

Paths in findings point into the generated definition (e.g. `$.parameters.properties.mode`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from typing import Any

from .findings import Path, Report
from .names import property_names

Schema = dict[str, Any]

# Keywords whose value is a subschema, a list of them, or a map of them (JSON Schema 2020-12 and
# draft 7, which MCP servers still emit).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
MAX_REF_DEPTH = 16  # a chain of $refs deeper than this is treated as recursive
MAX_INLINED = 500  # $ref expansions per schema, so a wide web of definitions cannot explode the output


def at(path: Path, key: str | int) -> Path:
    """The path of `key` under `path` (written out only if a finding needs it: findings.render)."""
    return (path, key)


# What each keyword's value is: a map of subschemas, a list of them, or one.
CHILDREN = {**dict.fromkeys(SCHEMA_MAPS, dict), **dict.fromkeys(SCHEMA_LISTS, list), **dict.fromkeys(SCHEMA_ONE, None)}
SUBSCHEMA_KEYS = frozenset(CHILDREN)


def map_children(node: Schema, path: Path, fn: Callable[[Any, Path, Any], Any], arg: object) -> Schema:
    """A copy of `node` with `fn(child, path, arg)` applied to every direct subschema (the walk's
    state as an argument rather than a closure, and exactly one: a plain call is the fastest)."""
    if SUBSCHEMA_KEYS.isdisjoint(node):  # a leaf (most nodes): a plain copy
        return dict(node)
    out: Schema = {}
    for key, value in node.items():
        kind = CHILDREN.get(key, False)
        if kind is dict and isinstance(value, dict):
            where = (path, key)
            out[key] = {k: fn(v, (where, k), arg) for k, v in value.items()}
        elif (kind is list or key == "items") and isinstance(value, list):
            where = (path, key)
            out[key] = [fn(v, (where, i), arg) for i, v in enumerate(value)]
        elif kind is None and isinstance(value, dict):
            out[key] = fn(value, (path, key), arg)
        else:
            out[key] = value
    return out


def rebuild(node: Schema, path: Path, fn: Callable[[Any, Path, Any], Any], arg: object) -> Schema:
    """`node` with `fn(child, path, arg)` applied to every direct subschema, copied only where a child
    changed (`fn` returns the child itself when it has nothing to change): the walks that change
    little (renaming, inlining, modernising) then copy little. A map or list is copied at its first
    changed child, so an unchanged one costs no second pass."""
    if SUBSCHEMA_KEYS.isdisjoint(node):  # a leaf (most nodes): nothing to walk
        return node
    out: Schema | None = None
    for key, value in node.items():
        kind = CHILDREN.get(key, False)
        if kind is False:  # most keys: not a subschema
            continue
        new: Any = None
        if kind is dict and isinstance(value, dict):
            where = (path, key)
            for k, v in value.items():
                changed = fn(v, (where, k), arg)
                if changed is not v:
                    new = dict(value) if new is None else new
                    new[k] = changed
        elif (kind is list or key == "items") and isinstance(value, list):
            where = (path, key)
            for i, v in enumerate(value):
                changed = fn(v, (where, i), arg)
                if changed is not v:
                    new = list(value) if new is None else new
                    new[i] = changed
        elif kind is None and isinstance(value, dict):
            changed = fn(value, (path, key), arg)
            new = None if changed is value else changed
        if new is not None:
            out = dict(node) if out is None else out
            out[key] = new
    return node if out is None else out


def resolve(root: Schema, ref: str) -> Schema | None:
    """The local target of `ref` (a JSON pointer such as `#/$defs/Node`), or None. Not a copy:
    every walk builds new dicts and never modifies what it reads."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def inline_refs(node: object, root: Schema, report: Report, path: Path) -> Any:
    """`node` with every local `$ref` replaced by its target and `$defs` removed. A recursive
    reference degrades to a permissive schema of the target's type, with a finding; so does any
    reference past MAX_INLINED expansions (a server's schema must not blow up the output)."""
    budget = [MAX_INLINED]

    def walk(node: object, path: Path, seen: tuple[str, ...]) -> Any:
        if not isinstance(node, dict) or ("$ref" not in node and SUBSCHEMA_KEYS.isdisjoint(node)):
            return node  # not a schema, or a leaf: nothing to inline
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
            return walk({**target, **rest}, path, (*seen, ref))
        if "$defs" in node or "definitions" in node:  # all inlined now
            node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        return rebuild(node, path, walk, seen)

    return walk(node, path, ())


def prepare(schema: Schema, report: Report, path: Path) -> Schema:
    """What every target starts from: an object at the root (every provider wants one), and
    draft-7 tuples (`items: [...]`) spelt the JSON Schema 2020-12 way (`prefixItems`)."""
    if schema.get("type") != "object":
        if "type" not in schema and not any(k in schema for k in SCHEMA_LISTS):
            report.note(at(path, "type"), '"type": "object" added', "providers require an object root")
            schema = {"type": "object", **schema}
        else:
            report.note(
                path, "root schema is not an object: replaced by an object with no properties", "providers require an object root"
            )
            return {"type": "object", "properties": {}}
    modern: Schema = modernise(schema, report, path)  # an object stays an object
    return modern


def has_tuples(node: object) -> bool:
    """Whether a draft-7 tuple (`items: [...]`) occurs anywhere in `node` (a scan, cheaper than a
    walk: most schemas have none). Leaves are skipped without a call: most nodes are leaves."""
    if not isinstance(node, dict):
        return False
    for key, value in node.items():
        kind = CHILDREN.get(key, False)
        if kind is False:
            continue
        if key == "items" and isinstance(value, list):
            return True
        if kind is dict and isinstance(value, dict):
            children: Any = value.values()
        elif kind is list and isinstance(value, list):
            children = value
        else:
            children = (value,)
        for child in children:
            if isinstance(child, dict) and not SUBSCHEMA_KEYS.isdisjoint(child) and has_tuples(child):
                return True
    return False


def modernise(node: object, report: Report, path: Path) -> Any:
    """`node` with draft-7 tuples spelt `prefixItems`, copied only where it has one."""
    return _modernise(node, path, report) if has_tuples(node) else node


def _modernise(node: object, path: Path, report: Report) -> Any:
    if not isinstance(node, dict):
        return node
    out = rebuild(node, path, _modernise, report)
    if isinstance(out.get("items"), list):
        out = dict(out) if out is node else out
        out["prefixItems"] = out.pop("items")
        if isinstance(out.get("additionalItems"), (dict, bool)):
            out["items"] = out.pop("additionalItems")
        report.note(at(path, "items"), "tuple items written as prefixItems", "JSON Schema 2020-12 spells tuples so")
    return out


def drop_schema_keyword(schema: Schema) -> Schema:
    # Not a finding: the dialect marker says nothing the model or the API needs, so nothing is lost.
    return {k: v for k, v in schema.items() if k != "$schema"}


# json.dumps with ensure_ascii=False builds a new encoder on every call; the usual scalars are
# written directly, exactly as it writes them.
SCALAR_JSON: dict[Any, Callable[[Any], str]] = {
    str: encode_basestring,
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def as_json(value: object) -> str:
    """`value` as JSON text, non-ASCII characters kept (what the model reads in a description)."""
    write = SCALAR_JSON.get(type(value))
    return write(value) if write else json.dumps(value, ensure_ascii=False)


def fold_into_description(node: Schema, extra: Mapping[str, object]) -> None:
    """Constraints a dialect cannot express, kept as words the model can still read."""
    if extra:
        words = "; ".join(f"{k}: {as_json(v)}" for k, v in extra.items())
        node["description"] = f"{node['description']} ({words})" if node.get("description") else f"({words})"


def merge_all_of(node: Schema, report: Report, path: Path) -> Schema:
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


def is_null(schema: object) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def accepts_null(schema: object, root: Schema, depth: int = 0) -> bool:
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


# -- arguments back --------------------------------------------------------------------------------


def restore_arguments(value: object, schema: object, root: Schema, *, renamed: bool, drop_nulls: bool, depth: int = 0) -> Any:
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

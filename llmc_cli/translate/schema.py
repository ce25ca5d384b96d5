"""JSON-Schema rewrites per provider dialect. Every loss or rewrite is reported as a Finding."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .names import PROPERTY_NAME

MAX_REF_DEPTH = 8


@dataclass(frozen=True)
class Finding:
    """One thing a translation had to change or drop: where, what, why."""

    tool: str  # server.tool
    path: str  # JSON path inside the definition, e.g. $.parameters.properties.mode
    what: str
    why: str
    target: str = ""

    def to_json(self) -> dict[str, str]:
        return {"tool": self.tool, "target": self.target, "path": self.path, "what": self.what, "why": self.why}

    def __str__(self) -> str:
        return f"{self.tool} {self.path}: {self.what} ({self.why})"


class Rewriter:
    def __init__(self, tool: str, target: str) -> None:
        self.tool, self.target = tool, target
        self.findings: list[Finding] = []

    def note(self, path: str, what: str, why: str) -> None:
        self.findings.append(Finding(self.tool, path, what, why, self.target))

    # -- $ref ----------------------------------------------------------------------------------

    def inline_refs(self, schema: Any, root: dict[str, Any], path: str, seen: tuple[str, ...] = ()) -> Any:
        """Replace local `$ref`s by what they point to; a recursive one becomes a permissive object."""
        if isinstance(schema, list):
            return [self.inline_refs(s, root, f"{path}[{i}]", seen) for i, s in enumerate(schema)]
        if not isinstance(schema, dict):
            return schema
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref in seen or len(seen) >= MAX_REF_DEPTH:
                self.note(path, f"recursive $ref {ref} replaced by an object without a schema",
                          "this dialect has no references")
                return {"type": "object", "description": schema.get("description", f"(recursive {ref})")}
            target = resolve_pointer(root, ref)
            if target is None:
                self.note(path, f"unresolvable $ref {ref} dropped", "only local references can be inlined")
                return {k: v for k, v in schema.items() if k != "$ref"}
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.inline_refs(merged, root, path, seen + (ref,))
        return {k: (v if k in ("$defs", "definitions") else self.inline_refs(v, root, f"{path}.{k}", seen))
                for k, v in schema.items()}


def resolve_pointer(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return copy.deepcopy(node) if isinstance(node, dict) else None


def object_root(schema: dict[str, Any], rw: Rewriter, path: str) -> dict[str, Any]:
    """Every provider wants an object at the root of the parameters."""
    if schema.get("type") == "object" or "properties" in schema:
        return {"type": "object", **schema}
    rw.note(path, "root schema is not an object: wrapped as an object with no properties", "providers require an object root")
    return {"type": "object", "properties": {}}


# -- OpenAI strict mode ---------------------------------------------------------------------------

STRICT_FORBIDDEN = ("allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                    "patternProperties", "unevaluatedProperties")


def openai_strict(schema: dict[str, Any], rw: Rewriter, path: str) -> dict[str, Any] | None:
    """Strict-mode schema: additionalProperties false everywhere, every property required,
    optional ones nullable. None (with a finding) when the schema cannot be strict."""
    root = rw.inline_refs(schema, schema, path)
    root.pop("$defs", None), root.pop("definitions", None)
    blocked: list[str] = []

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [walk(n, f"{where}[{i}]") for i, n in enumerate(node)]
        if not isinstance(node, dict):
            return node
        for key in STRICT_FORBIDDEN:
            if key in node:
                blocked.append(f"{where}.{key}")
        out = {k: walk(v, f"{where}.{k}") for k, v in node.items() if k != "$schema"}
        if "oneOf" in out:
            out["anyOf"] = out.pop("oneOf")
            rw.note(where, "oneOf turned into anyOf", "strict mode has no oneOf")
        if out.get("type") == "object" or "properties" in out:
            props = out.get("properties") or {}
            required = set(out.get("required") or [])
            for name, prop in props.items():
                if name not in required:
                    props[name] = nullable(prop)
            out["properties"] = props
            out["required"] = list(props)
            out["additionalProperties"] = False
        return out

    result = walk(root, path)
    if blocked:
        rw.note(path, "cannot be strict: uses " + ", ".join(sorted(set(b.rsplit('.', 1)[1] for b in blocked))),
                "OpenAI strict mode does not support these keywords")
        return None
    return result


def nullable(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return prop
    kind = prop.get("type")
    if isinstance(kind, str):
        return {**prop, "type": [kind, "null"]} if kind != "null" else prop
    if isinstance(kind, list):
        return prop if "null" in kind else {**prop, "type": [*kind, "null"]}
    if "anyOf" in prop:
        return prop if any(isinstance(s, dict) and s.get("type") == "null" for s in prop["anyOf"]) else \
            {**prop, "anyOf": [*prop["anyOf"], {"type": "null"}]}
    return {"anyOf": [prop, {"type": "null"}]}


# -- Gemini ---------------------------------------------------------------------------------------

GEMINI_DROP = ("$schema", "$id", "$comment", "examples", "patternProperties", "uniqueItems", "not",
               "if", "then", "else", "dependentRequired", "dependentSchemas", "contentEncoding",
               "contentMediaType", "unevaluatedProperties", "deprecated", "readOnly", "writeOnly")


def gemini(schema: dict[str, Any], rw: Rewriter, path: str, renames: dict[str, str]) -> dict[str, Any]:
    """`parameters_json_schema` the Gemini API accepts: no $schema, const -> one-value enum,
    property names made legal (renames: new -> old, so arguments map back)."""

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [walk(n, f"{where}[{i}]") for i, n in enumerate(node)]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in GEMINI_DROP:
                rw.note(f"{where}.{key}", f"{key} dropped", "Gemini rejects or ignores it")
                continue
            if key == "const":
                out["enum"] = [value]
                rw.note(f"{where}.const", "const turned into a one-value enum", "Gemini has no const")
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {}
                for name, prop in value.items():
                    legal = _property_name(name, out[key], renames, rw, f"{where}.properties")
                    out[key][legal] = walk(prop, f"{where}.properties.{legal}")
                continue
            if key == "required" and isinstance(value, list):
                inverse = {old: new for new, old in renames.items()}
                out[key] = [inverse.get(n, n) for n in value]
                continue
            out[key] = walk(value, f"{where}.{key}") if key not in ("enum", "default") else value
        return out

    return walk(schema, path)


def _property_name(name: str, taken: dict[str, Any], renames: dict[str, str], rw: Rewriter, where: str) -> str:
    if PROPERTY_NAME.match(name) and name not in taken:
        return name
    import re

    new = re.sub(r"[^a-zA-Z0-9_]", "_", name)[:64] or "_"
    if not re.match(r"[a-zA-Z_]", new):
        new = "_" + new[:63]
    while new in taken or new in renames:
        new = new[:60] + "_" + str(len(renames))
    renames[new] = name
    rw.note(f"{where}.{name}", f"property renamed to {new!r}", "Gemini property names allow letters, digits and _ only")
    return new


# -- gemini-legacy: the OpenAPI subset ---------------------------------------------------------

LEGACY_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required",
               "minItems", "maxItems"}


def openapi_subset(schema: dict[str, Any], rw: Rewriter, path: str, renames: dict[str, str]) -> dict[str, Any]:
    inlined = rw.inline_refs(schema, schema, path)
    cleaned = gemini({k: v for k, v in inlined.items() if k not in ("$defs", "definitions")}, rw, path, renames)

    def walk(node: Any, where: str) -> Any:
        if not isinstance(node, dict):
            return node
        node = dict(node)
        for union in ("anyOf", "oneOf"):
            options = node.pop(union, None)
            if isinstance(options, list):
                rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
                if len(rest) == 1 and isinstance(rest[0], dict):
                    node = {**rest[0], **node, "nullable": len(rest) < len(options) or node.get("nullable", False)}
                    if not node["nullable"]:
                        node.pop("nullable")
                else:
                    rw.note(f"{where}.{union}", f"{union} with {len(rest)} options dropped (any value allowed)",
                            "the OpenAPI subset has no unions")
        if isinstance(node.get("type"), list):
            kinds = [t for t in node["type"] if t != "null"]
            if "null" in node["type"]:
                node["nullable"] = True
            node["type"] = kinds[0] if kinds else "string"
            if len(kinds) > 1:
                rw.note(f"{where}.type", f"type {kinds} narrowed to {kinds[0]}", "the OpenAPI subset has one type")
        if "allOf" in node:
            for part in node.pop("allOf"):
                if isinstance(part, dict):
                    for k, v in part.items():
                        node.setdefault(k, v)
            rw.note(f"{where}.allOf", "allOf merged into one schema", "the OpenAPI subset has no allOf")
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key not in LEGACY_KEYS:
                rw.note(f"{where}.{key}", f"{key} dropped", "not in the OpenAPI subset older Gemini SDKs accept")
                continue
            if key == "enum":
                value = [str(v) for v in value if v is not None]
            elif key == "items":
                value = walk(value, f"{where}.items")
            elif key == "properties" and isinstance(value, dict):
                value = {n: walk(p, f"{where}.properties.{n}") for n, p in value.items()}
            out[key] = value
        if out.get("enum") and out.get("type") not in (None, "string"):
            out["type"] = "string"
            rw.note(f"{where}.enum", "enum values turned into strings", "enum values must be strings")
        return out

    return walk(cleaned, path)

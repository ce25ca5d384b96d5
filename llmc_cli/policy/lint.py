"""Lint: path-like arguments that no argument rule covers (`tools lint`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from llmc_cli.model import Tool
from llmc_cli.policy.rules import glob_match

if TYPE_CHECKING:
    from llmc_cli.config.schema import PolicyConfig

# Words that, in an argument's name (any word of sourcePath, output_file, ...), usually mean a path.
PATH_WORDS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filenames",
        "filepath",
        "dir",
        "dirs",
        "directory",
        "directories",
        "folder",
        "folders",
        "source",
        "sources",
        "destination",
        "target",
        "cwd",
        "root",
        "roots",
        "src",
        "dest",
        "dst",
        "location",
    }
)
PATH_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference", "path", "file-path"})
_PATH_DESCRIPTION = re.compile(r"\b(paths?|director(?:y|ies)|folders?|file ?names?)\b", re.IGNORECASE)
_NOT_TEXT = frozenset({"number", "integer", "boolean", "null"})


def uncovered_path_arguments(tool: Tool, config: PolicyConfig) -> list[tuple[str, str]]:
    """(argument, why) for each argument of a tool under an argument rule that looks like a path
    (by its name, its schema's format or its description, at any depth) but that no rule
    covers: the hole a rule on `path` leaves when the tool also takes `paths` or `destination`.
    [] for a tool no argument rule matches (`tools lint` reports these)."""
    covered = {arg for pattern, rules in config.args.items() if glob_match(pattern, tool.qualified_name) for arg in rules}
    if not covered:
        return []
    found = []
    for name, schema in tool.properties.items():
        why = None if name in covered else _path_like(name, schema)
        if why:
            found.append(
                (
                    name,
                    f"{why}, but the argument rules on {tool.qualified_name} cover only "
                    f"{', '.join(sorted(covered))}: a path here is not checked",
                )
            )
    return found


def _path_like(name: str, schema: object, depth: int = 0) -> str | None:
    if not isinstance(schema, dict) or depth > 8:
        return None
    types = schema.get("type")
    if (set(types) if isinstance(types, list) else {types}) <= _NOT_TEXT:
        return None
    words = {w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", name)}
    if words & PATH_WORDS:
        return f"its name {name!r} suggests a path"
    if schema.get("format") in PATH_FORMATS:
        return f"its schema has format {schema['format']!r}"
    if isinstance(schema.get("description"), str) and _PATH_DESCRIPTION.search(schema["description"]):
        return "its description speaks of paths"
    inner = [("items", schema.get("items")), *(schema.get("properties") or {}).items()]
    inner += [("variant", v) for key in ("anyOf", "oneOf", "allOf") for v in schema.get(key) or []]
    for sub, sub_schema in inner:
        why = _path_like(name if sub in ("items", "variant") else sub, sub_schema, depth + 1)
        if why:
            return why if sub in ("items", "variant") else f"it holds {sub!r}: {why}"
    return None

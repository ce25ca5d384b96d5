"""Profile data -> the schema's dataclasses, and every error on the way as one line that names
the file, the line when it can be known, and the key: FILE:LINE: KEY: problem.

pydantic is imported only here and only when validating or dumping (it is slow to import).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from llmc_cli.config.schema import Profile
from llmc_cli.errors import ConfigError, did_you_mean

_TOML_LINE = r"\(at line (\d+), column \d+\)"  # compiled (and cached) by re at first use
# Keys that were accepted once and are gone: a profile that still sets one is told why, not
# just "unknown key".
REMOVED_KEYS = {
    "llm.summarize_with": "removed: it was accepted but never had an effect (long tool results are cut to "
    "[llm] result_budget); delete the line",
}


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """Parsed TOML, or a ConfigError naming the line of the syntax error."""
    import tomllib  # here: a profile that validated before comes from the profile cache

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(_TOML_LINE, str(exc))
        line = f":{found.group(1)}" if found else ""
        raise ConfigError(f"{where}{line}: invalid TOML: {exc}") from None


@cache
def adapter(cls: type[Any]) -> Any:
    """pydantic's validator/serializer for a schema dataclass (imports pydantic: call only when
    validating or dumping)."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def dump(obj: object, **options: object) -> dict[str, Any]:
    """A schema dataclass as JSON-ready data (pydantic's model_dump(mode="json", ...))."""
    cls: type = type(obj)
    data: dict[str, Any] = adapter(cls).dump_python(obj, mode="json", **options)
    return data


def validate(data: Mapping[str, object], where: str, text: str | None = None) -> Any:
    """A Profile from parsed TOML; `text` (the file's) lets the error name the line."""
    from pydantic import ValidationError

    try:
        return adapter(Profile).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"]]
        # No loc: a check across the whole profile (server names), its message says what.
        key = f"{'.'.join(loc)}: " if loc else ""
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):  # dataclasses say the latter
            message = REMOVED_KEYS.get(".".join(loc)) or "unknown key" + did_you_mean(loc[-1], keys_beside(Profile, loc))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        line = line_of(text, loc) if text else None
        raise ConfigError(f"{where}{f':{line}' if line else ''}: {key}{message}{more}") from None


def line_of(text: str, loc: list[str]) -> int | None:
    """The line of the failing key, when the text says so unambiguously (TOML parsers do not
    keep positions): its `key =` line, or its `[table]` header; None when unsure."""
    if not loc:
        return None
    lines = text.splitlines()
    key = re.escape(loc[-1])
    assignment = re.compile(rf"^\s*[\"']?{key}[\"']?\s*=")
    hits = [n for n, line in enumerate(lines, 1) if assignment.match(line)]
    if len(hits) != 1:
        header = re.compile(rf"^\s*\[+\s*{re.escape('.'.join(loc))}\s*\]+")
        hits = [n for n, line in enumerate(lines, 1) if header.match(line)]
    return hits[0] if len(hits) == 1 else None


def keys_beside(root: type[Any], loc: list[str]) -> list[str]:
    """The keys the table holding `loc`'s last key may have (for did-you-mean): the fields of the
    schema dataclass reached by walking `loc` from `root` (a dict's key steps into its values)."""

    def table(kind: Any) -> Any:  # Optional[X] -> X
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        return args[0] if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1 else kind

    kind: Any = root
    for part in loc[:-1]:
        kind = table(kind)
        if dataclasses.is_dataclass(kind):
            kind = typing.get_type_hints(kind).get(part)
        elif typing.get_origin(kind) is dict:
            kind = typing.get_args(kind)[1]
        else:
            return []
    kind = table(kind)
    return [f.name for f in dataclasses.fields(kind)] if dataclasses.is_dataclass(kind) else []

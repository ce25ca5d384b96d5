"""MCP tool definitions -> exactly what each LLM API accepts, with an honest report of what changed.

    from llmc_cli.translate import FORMATS, LINT_FORMATS, translate, lint

    t = translate(tools, "gemini")               # tools: list[llmc_cli.model.Tool]; fmt: one of FORMATS
    t.definitions                                # the JSON to print or send (a str for "text")
    t.names["server_tool"]                       # -> ("server", "tool"): route a model's call back
    t.names.provider_name("server", "tool")      # -> "server_tool"
    t.arguments_back("server_tool", arguments)   # the model's arguments as the MCP server wants them
    t.warnings                                   # list[Finding]: tool, path, what, why, target
    lint(tools, ["openai", "gemini"])            # list[Finding]: what each provider rejects or loses

FORMATS: mcp (Tool.raw, untouched) · openai (Chat Completions) · openai-responses · anthropic ·
gemini (google-genai `parameters_json_schema`) · gemini-legacy (the OpenAPI subset of older
Gemini/Vertex SDKs) · text (a listing for a system prompt, for models without tool calling).

Names: with one server, a tool keeps its name when the provider allows it; with several, names
are `server_tool`. Illegal names are sanitised deterministically (hash suffix on a clash or when
too long) and reported. `strict=True` asks for OpenAI strict-mode schemas (other formats ignore
it); a tool that cannot be strict goes out non-strict with findings saying why. Strict mode
makes optional properties required-but-nullable, and Gemini renames illegal property names:
`arguments_back` undoes both, so always pass the model's arguments through it.

`definitions` is fresh JSON (never shares objects with the input tools) except for "mcp".
No SDK is imported here: the tests validate the output with each SDK's own types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from importlib import import_module
from types import ModuleType
from typing import Any

from llmc_cli.model import LINT_FORMATS, TOOL_FORMATS, JSONObject, Tool, dataclass

from .findings import Finding, Report
from .names import NameMap, assign
from .schema import restore_arguments

FORMATS = TOOL_FORMATS  # the registry is model.py's: the CLI and the config name the same formats
RENAMES_PROPERTIES = ("gemini", "gemini-legacy")


@dataclass
class Translation:
    format: str
    definitions: Any
    names: NameMap
    warnings: list[Finding] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict, repr=False)  # provider name -> Tool
    strict_names: frozenset[str] = frozenset()  # tools that went out in OpenAI strict mode

    def arguments_back(self, name: str, arguments: JSONObject) -> JSONObject:
        """A model's arguments for tool `name` in the MCP server's terms: renamed properties
        (Gemini) get their original names, nulls that strict mode allowed for optional
        properties are removed. Unknown names and keys pass through unchanged."""
        tool = self.tools.get(name)
        renamed = self.format in RENAMES_PROPERTIES
        drop_nulls = name in self.strict_names
        if tool is None or not (renamed or drop_nulls) or not isinstance(arguments, dict):
            return arguments
        schema = tool.input_schema
        restored: JSONObject = restore_arguments(arguments, schema, schema, renamed=renamed, drop_nulls=drop_nulls)
        return restored


def _target(fmt: str) -> ModuleType:
    return import_module(f"{__name__}.{fmt.replace('-', '_')}")


JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    """A value `_copy` leaves to the JSON round trip."""


def _copy(value: Any) -> Any:
    """A deep copy of plain JSON values (str-keyed dicts, lists, scalars), tuples written as lists,
    as a JSON round trip would; _NotPlain for anything else. Scalars, most of the values, are
    taken as they are without a call."""
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = item if type(item) in JSON_SCALARS else _copy(item)
        return out
    if kind is list or kind is tuple:
        return [item if type(item) in JSON_SCALARS else _copy(item) for item in value]
    if kind in JSON_SCALARS:
        return value
    raise _NotPlain


def fresh(document: Any) -> Any:
    """`document` as new JSON sharing no object with the input tools nor within itself (an
    inlined definition used twice is two objects): the same result as a JSON round trip, in
    half the time. Anything not plain JSON takes the round trip itself, which converts it or
    says why it cannot."""
    try:
        return _copy(document)
    except (_NotPlain, RecursionError):  # the round trip copes as it always did, or fails as it did
        return json.loads(json.dumps(document))


def translate(
    tools: list[Tool], fmt: str, *, strict: bool = False, names: Mapping[tuple[str, str], str] | None = None
) -> Translation:
    """`tools` in format `fmt` (see FORMATS); ValueError for an unknown format. `names`: the
    provider name wanted for (server, tool), made legal if it is not (see names.assign)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    target = _target(fmt)
    warnings: list[Finding] = []
    unique: dict[tuple[str, str], Tool] = {}
    for tool in tools:
        if (tool.server, tool.name) in unique:
            warnings.append(
                Finding(
                    tool.qualified_name,
                    "$",
                    "duplicate tool left out",
                    "the server listed two tools with this name; the first one is kept",
                    fmt,
                )
            )
        else:
            unique[(tool.server, tool.name)] = tool
    name_map, renamed = assign(list(unique), target.NAMES, fmt, names)
    warnings += renamed
    if target.MAX_TOOLS and len(unique) > target.MAX_TOOLS:
        warnings.append(
            Finding(
                "*",
                "$",
                f"{len(unique)} tools, more than {target.MAX_TOOLS}",
                f"{fmt} rejects a request with more than {target.MAX_TOOLS} tools",
                fmt,
            )
        )
    definitions, by_name, strict_names = [], {}, set()
    for (server, tool_name), tool in unique.items():
        name = name_map.provider_name(server, tool_name)
        report = Report(tool.qualified_name, fmt)
        definitions.append(target.definition(tool, name, report, strict))
        warnings += report.findings
        by_name[name] = tool
        if report.strict:
            strict_names.add(name)
    document = target.document(definitions)
    if fmt != "mcp" and not isinstance(document, str):
        document = fresh(document)
    return Translation(fmt, document, name_map, warnings, by_name, frozenset(strict_names))


def lint(tools: list[Tool], providers: tuple[str, ...] | list[str] = LINT_FORMATS, *, strict: bool = False) -> list[Finding]:
    """What each provider would reject or lose, and why: the findings of translating `tools`
    for every one of `providers` (each Finding's `target` says which)."""
    findings: list[Finding] = []
    for provider in providers:
        findings.extend(translate(tools, provider, strict=strict).warnings)
    return findings


__all__ = ["FORMATS", "LINT_FORMATS", "Finding", "NameMap", "Translation", "lint", "translate"]

"""MCP tool definitions -> exactly what each LLM API accepts, with an honest report of what changed.

    from llmc_cli.translate import translate, lint, FORMATS
    t = translate(tools, "gemini")          # tools: list[llmc_cli.model.Tool]
    t.definitions                           # JSON to print or send (str for "text")
    t.names["server_tool"]                  # -> ("server", "tool"): route a call back
    t.arguments_back("server_tool", args)   # the model's arguments in the MCP names
    t.warnings                              # list[Finding]: tool, JSON path, what, why

Pure functions over the neutral model: no SDK is imported here (tests validate the output with
each SDK's own types).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmc_cli.model import Tool

from .names import NameMap, assign
from .schema import Finding, Rewriter, gemini, object_root, openai_strict, openapi_subset

FORMATS = ("mcp", "openai", "openai-responses", "anthropic", "gemini", "gemini-legacy", "text")
PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini", "gemini-legacy")
DIALECT = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gemini",
           "gemini-legacy": "gemini", "text": None, "mcp": None}
MAX_TOOLS = {"openai": 128, "openai-responses": 128, "gemini": 128, "gemini-legacy": 128}


@dataclass
class Translation:
    format: str
    definitions: Any
    names: NameMap
    warnings: list[Finding] = field(default_factory=list)
    property_renames: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> {new: old}

    def arguments_back(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A model's arguments with renamed properties (Gemini) mapped back to the MCP names."""
        renames = self.property_renames.get(name) or {}
        return {renames.get(k, k): v for k, v in arguments.items()}


def describe(tool: Tool) -> str:
    """The description, with what no provider has a field for (title, annotations) folded in."""
    text = tool.description.strip()
    title = (tool.title or "").strip()
    if title and title.lower() not in text.lower():
        text = f"{title}. {text}" if text else title
    hints = tool.annotations
    flags = []
    if hints.get("readOnlyHint") is True:
        flags.append("read-only")
    elif hints.get("destructiveHint") is True:
        flags.append("destructive")
    if hints.get("idempotentHint") is True and not hints.get("readOnlyHint"):
        flags.append("idempotent")
    if hints.get("openWorldHint") is True:
        flags.append("reaches outside systems")
    if flags:
        text = f"{text} [{', '.join(flags)}]" if text else f"[{', '.join(flags)}]"
    return text or tool.name


def translate(tools: list[Tool], fmt: str, *, strict: bool = False) -> Translation:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    names, renamed = assign([(t.server, t.name) for t in tools], DIALECT[fmt])
    warnings = [Finding(f"{s}.{t}", "$.name", why.split(":")[0], why.split(": ", 1)[-1], fmt) for s, t, why in renamed]
    if fmt in MAX_TOOLS and len(tools) > MAX_TOOLS[fmt]:
        warnings.append(Finding("*", "$", f"{len(tools)} tools, more than {MAX_TOOLS[fmt]}",
                                f"{fmt} rejects requests with more than {MAX_TOOLS[fmt]} tools", fmt))
    if fmt == "mcp":
        return Translation(fmt, [t.raw for t in tools], names, warnings)
    out = Translation(fmt, None, names, warnings)
    defs = [_one(t, names.provider_name(t.server, t.name), fmt, strict, out) for t in tools]
    if fmt == "text":
        out.definitions = _text_listing(defs)
    elif fmt in ("gemini", "gemini-legacy"):
        out.definitions = [{"function_declarations": defs}]  # a `tools` list as the API takes it
    else:
        out.definitions = defs
    return out


def _one(tool: Tool, name: str, fmt: str, strict: bool, out: Translation) -> Any:
    rw = Rewriter(tool.qualified_name, fmt)
    schema = object_root(tool.input_schema, rw, "$.inputSchema")
    description = describe(tool)
    if fmt in ("openai", "openai-responses"):
        params = {k: v for k, v in schema.items() if k != "$schema"}
        is_strict = False
        if strict:
            converted = openai_strict(params, rw, "$.parameters")
            if converted is not None:
                params, is_strict = converted, True
        out.warnings.extend(rw.findings)
        if fmt == "openai":
            return {"type": "function", "function": {"name": name, "description": description,
                                                      "parameters": params, "strict": is_strict}}
        return {"type": "function", "name": name, "description": description, "parameters": params,
                "strict": is_strict}
    if fmt == "anthropic":
        out.warnings.extend(rw.findings)
        return {"name": name, "description": description,
                "input_schema": {k: v for k, v in schema.items() if k != "$schema"}}
    if fmt == "gemini":
        renames: dict[str, str] = {}
        params = gemini(schema, rw, "$.parameters_json_schema", renames)
        if renames:
            out.property_renames[name] = renames
        out.warnings.extend(rw.findings)
        return {"name": name, "description": description, "parameters_json_schema": params}
    if fmt == "gemini-legacy":
        renames = {}
        params = openapi_subset(schema, rw, "$.parameters", renames)
        if renames:
            out.property_renames[name] = renames
        out.warnings.extend(rw.findings)
        return {"name": name, "description": description, "parameters": params}
    out.warnings.extend(rw.findings)
    return {"name": name, "description": description, "parameters": schema}


def _text_listing(defs: list[dict[str, Any]]) -> str:
    import json

    blocks = []
    for d in defs:
        blocks.append(f"## {d['name']}\n{d['description']}\nparameters (JSON Schema): "
                      f"{json.dumps(d['parameters'], ensure_ascii=False, separators=(',', ':'))}")
    return "\n\n".join(blocks)


def lint(tools: list[Tool], providers: tuple[str, ...] | list[str] = PROVIDERS, *, strict: bool = False) -> list[Finding]:
    """What each provider would reject or lose, and why."""
    findings: list[Finding] = []
    for provider in providers:
        findings.extend(translate(tools, provider, strict=strict).warnings)
    return findings


__all__ = ["FORMATS", "PROVIDERS", "Finding", "NameMap", "Translation", "describe", "lint", "translate"]

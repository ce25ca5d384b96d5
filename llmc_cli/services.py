"""Use cases shared by every command. `call_tool` is the ONLY path that runs a tool."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile, server_specs
from llmc_cli.errors import ProtocolError
from llmc_cli.mcp.session import ClientHooks
from llmc_cli.model import ServerSpec, Tool, ToolCall, ToolResult


@dataclass
class Invocation:
    """Who runs a tool call and how a human may be asked about it."""

    profile: LoadedProfile
    command: str = "call"  # call | ask | batch
    interactive: bool = False  # a human can answer a confirmation prompt
    assume_yes: bool = False  # --yes: confirmations answered yes
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None
    conversation_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def builtin_servers() -> dict[str, Callable[[ServerSpec], Any]]:
    def workspace(spec: ServerSpec) -> Any:
        from llmc_cli.server.workspace import make_workspace_server

        options = dict(spec.options)
        return make_workspace_server(**options)

    return {"workspace": workspace}


def open_catalog(profile: LoadedProfile | None, only: tuple[str, ...] = (), adhoc: ServerSpec | None = None,
                 hooks: ClientHooks | None = None, on_stderr: Callable[[str, str], None] | None = None,
                 timeout: float | None = None) -> Catalog:
    if adhoc is None and profile is None:
        raise ValueError("open_catalog needs a profile or an ad-hoc server")
    specs = [adhoc] if adhoc else server_specs(profile, only)  # type: ignore[arg-type]
    if timeout:
        specs = [replace(spec, timeout=timeout) for spec in specs]
    return Catalog(specs, hooks=hooks, builtins=builtin_servers(), on_stderr=on_stderr)


def call_tool(catalog: Catalog, invocation: Invocation, call: ToolCall, *, timeout: float | None = None) -> ToolResult:
    """Run one tool call. Returns the result (is_error included); raises LlmcError otherwise."""
    started = time.monotonic()
    raw = catalog.session(call.server).call_tool(call.tool, call.arguments, timeout=timeout)
    if not isinstance(raw.get("content", []), list):
        raise ProtocolError(f"{call.server}: tools/call result has no content list")
    result = ToolResult.from_mcp(raw)
    result.duration_ms = round((time.monotonic() - started) * 1000, 1)
    return result

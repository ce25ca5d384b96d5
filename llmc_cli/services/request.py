"""A request to the pipeline (ToolRequest; a read is services/reads.py's Read) and what it came to
(Outcome): what callers hand services/pipeline.py's Pipeline.run and render. Out of pipeline.py,
which keeps the stages."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.model import JSONObject, NamedTuple, Tool, ToolCall, ToolResult

if TYPE_CHECKING:
    from llmc_cli.services.reads import Read


# The request and outcome are NamedTuples, not dataclasses: a command makes one of each, and the
# class costs a tenth as much to create at import (a call through a keeper is mostly start-up).
class ToolRequest(NamedTuple):
    """A tool call as a caller has it. `name`: SERVER.TOOL or a bare tool name (resolved against
    the catalog), or, with `server`, the tool's own name on that server (already routed).
    `arguments`, or `typed`: the arguments made from the tool's inputSchema once it is known
    (the command line's KEY=VALUE pairs). `validate`: check them against that schema first."""

    name: str
    arguments: JSONObject | None = None
    server: str | None = None
    typed: Callable[[JSONObject], JSONObject] | None = None
    validate: bool = False
    call_id: str | None = None  # the provider's id, when a model made the call
    timeout: float | None = None
    meta: JSONObject | None = None  # the request's _meta, relayed (the gateway's progress token)
    tool: Tool | None = None  # the tool, when the caller found it already in the same catalog (not looked up again)
    # True when the caller found no calls.unstarted_denial of its server and name under the very
    # invocation of the pipeline it hands this to (the gateway's: its route is checked before
    # the tool is looked up): not asked again
    cleared: bool = False

    @classmethod
    def of(
        cls, call: ToolCall, *, meta: JSONObject | None = None, tool: Tool | None = None, cleared: bool = False
    ) -> ToolRequest:
        """The request of a call whose server and tool are known already (`tool`: the catalog's
        Tool of it, when the caller holds it; `cleared`: as the field says)."""
        return cls(call.tool, call.arguments, server=call.server, call_id=call.call_id, meta=meta, tool=tool, cleared=cleared)


class Outcome(NamedTuple):
    """What a call or read that returned a result came to. `request`: the resolved call or the
    read; `raw`: the result as delivered (after inspection); `result`: a call's, as a ToolResult;
    `findings`: what the inspectors found (services/inspect.py)."""

    request: ToolCall | Read
    raw: JSONObject
    duration_ms: float
    cached: bool = False
    findings: tuple[JSONObject, ...] = ()
    result: ToolResult | None = None

    @property
    def tool_result(self) -> ToolResult:
        if self.result is None:
            raise TypeError("a read has no tool result")
        return self.result

    @property
    def tool_call(self) -> ToolCall:
        if not isinstance(self.request, ToolCall):
            raise TypeError("a read is no tool call")
        return self.request

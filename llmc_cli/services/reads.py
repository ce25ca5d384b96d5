"""One resources/read, prompts/get or completion/complete (a Read), run by the pipeline (services/pipeline.py, the ONLY
path that reads a resource, gets a prompt or asks for completions of either) with the decision and outcome records, rate limits,
inspection and interruptions of a tool call; authorize_read() its decision; read_decision() the
one judge of reads, listings, completions and subscriptions."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal, cast

from llmc_cli import audit, policy, telemetry  # (audit: services.calls loads it anyway)
from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.jsonrpc import has_lone_surrogate
from llmc_cli.model import JSONObject, Tool, dataclass
from llmc_cli.services.calls import Authorization, Invocation, clearance_denial

if TYPE_CHECKING:
    from llmc_cli.policy import Decision, ReadKind
    from llmc_cli.store.chain import AuditRecord


@dataclass(frozen=True)
class Read:
    """A resources/read (`kind` "resource", `name` its URI) or a prompts/get ("prompt", `name`
    the prompt's name, with its string arguments) of one server. With `completing`, the
    completion/complete of that prompt's or resource template's (`name` the URI template)
    argument: (its name, the value so far); `arguments` then the context's, resolved already.
    A completion is judged, rate-limited and audited as a read of what it completes."""

    server: str
    kind: Literal["resource", "prompt"]
    name: str
    arguments: dict[str, str] = field(default_factory=dict)
    completing: tuple[str, str] | None = None

    @property
    def qualified_name(self) -> str:
        """What [policy.resources]/[policy.prompts] globs and the rate limits match: server.URI, server.NAME."""
        return f"{self.server}.{self.name}"

    @property
    def method(self) -> str:
        if self.completing is not None:
            return "completion/complete"
        return "resources/read" if self.kind == "resource" else "prompts/get"

    @property
    def judged_as(self) -> ReadKind:
        """What the policy judges: a resource's completion is of a URI template, judged as its text."""
        return "template" if self.kind == "resource" and self.completing is not None else self.kind

    @property
    def shown_arguments(self) -> dict[str, str]:
        """The arguments as the audit records them (a completion's partial value among them)."""
        if self.completing is None:
            return self.arguments
        return {**self.arguments, self.completing[0]: self.completing[1]}

    def params(self) -> JSONObject:
        if self.completing is not None:
            ref: JSONObject = (
                {"type": "ref/resource", "uri": self.name}
                if self.kind == "resource"
                else {"type": "ref/prompt", "name": self.name}
            )
            name, value = self.completing
            context: JSONObject = {"context": {"arguments": dict(self.arguments)}} if self.arguments else {}
            return {"ref": ref, "argument": {"name": name, "value": value}, **context}
        if self.kind == "resource":
            return {"uri": self.name}
        arguments: JSONObject = dict(self.arguments)
        return {"name": self.name, **({"arguments": arguments} if self.arguments else {})}


def authorize_read(catalog: Catalog, invocation: Invocation, request: Read) -> Authorization:
    """The policy's decision on a read (nothing is asked: a read needs no confirmation)."""
    denial = clearance_denial(invocation, request.server)
    if denial is not None:
        decision = denial
    elif has_lone_surrogate([request.name, request.arguments, request.completing]):
        decision = policy.Decision(
            "deny", "invalid_text", f"the {request.kind} name or its arguments contain a lone surrogate (invalid Unicode text)"
        )
    else:
        decision = read_decision(catalog, invocation.profile, request.judged_as, request.server, request.name)
    telemetry.policy_decision(request.qualified_name, decision.action, decision.rule, invocation.caller)
    arguments = request.shown_arguments
    masker = invocation.masker.with_arguments(arguments)
    base = {
        **audit.identity(),
        "profile": invocation.profile.name,
        "command": invocation.command,
        "conversation": invocation.conversation_id,
        "client": invocation.client,
        "server": request.server,
        request.kind: request.name,
        # a completion's records say which argument was completed; its value so far is among the arguments
        "completion": request.completing[0] if request.completing is not None else None,
        "arguments": masker(arguments) if request.kind == "prompt" or request.completing is not None else None,
    }
    return Authorization(request, decision, cast("AuditRecord", {k: v for k, v in base.items() if v is not None}), masker)


def read_decision(catalog: Catalog, profile: LoadedProfile, kind: ReadKind, server: str, name: str) -> Decision:
    """policy.decide_read under the profile, the server's tools asked of the catalog only when the
    policy needs them: the one judge of reads, listings, completions and subscriptions."""

    return policy.decide_read(kind, server, name, profile.profile.policy, lambda: server_tools(catalog, server))


def server_tools(catalog: Catalog, server: str) -> list[Tool]:
    """A server's tools, for the policy's judgement of its resources and prompts; [] for a server
    that offers none (declares no tools capability, or answers tools/list with "method not found")."""
    session = catalog.session(server)
    if session.capabilities and "tools" not in session.capabilities:
        return []
    try:
        return catalog.tools_of(server)
    except RpcError as exc:
        if exc.code != jsonrpc.METHOD_NOT_FOUND:
            raise
        return []

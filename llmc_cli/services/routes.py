"""What authorize (services/calls.py) concludes alike of every cleared call of one tool under one
invocation (Route): a batch's thousand calls of a tool conclude it once, and each call adds only
what is its own (its arguments, masked, and its call hash). Out of calls.py, at its 500 lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli import telemetry
from llmc_cli.mcp.jsonrpc import LONE_SURROGATE
from llmc_cli.model import MAX_ARGUMENT_DEPTH, canonical_json, canonical_json_bytes, hmac_sha256
from llmc_cli.policy import Decision

# calls imports this module at its top (authorize makes Routes), and this one reads calls'
# Authorization and record bases at run time: the module, not its names, so either may load first
from llmc_cli.services import calls

if TYPE_CHECKING:
    from llmc_cli.model import Tool, ToolCall
    from llmc_cli.services.calls import Authorization, Invocation


class Route:
    """What authorize concludes alike of every cleared call of one tool under one invocation, made
    at its second call: the policy's decision where it reads nothing of the call (policy.decide's
    verdict of the tool, [guard] descriptions = "hide" on top), and the audit record's fields but
    the call's own (arguments, callHash), masked. Used while the tool and the policy are the very
    objects it was made of (held). `decision` is None where each call is judged in full: an
    argument rule names the tool, it needs a confirmation (the approvals read each call's hash),
    or the profile has a lock."""

    __slots__ = ("base", "caller", "decision", "key", "masker", "output_schema", "policy", "qualified", "reason", "tool")

    def __init__(self, invocation: Invocation, key: tuple[str, str], tool: Tool, decision: tuple[str, str, str] | None) -> None:
        self.tool, self.policy, self.decision = tool, invocation.profile.profile.policy, decision
        self.qualified = f"{key[0]}.{key[1]}"  # call.qualified_name
        self.caller, self.key, self.masker = invocation.caller, invocation.approval_key, invocation.masker
        self.base = calls._base(invocation, key[0], key[1], self.masker)
        self.reason = self.masker(decision[2]) if decision is not None else None  # decision_record's
        self.output_schema = tool.output_schema

    def holds(self, invocation: Invocation, tool: Tool) -> bool:
        """Whether the Route still stands for calls of `tool` under the invocation (authorize's test)."""
        return self.tool is tool and self.policy is invocation.profile.profile.policy

    def authorize(self, call: ToolCall) -> Authorization | None:
        """authorize()'s Authorization of a call of this route; None for arguments it takes the
        long way for: nested deep, holding a lone surrogate or a secret (its masker masks more)."""
        arguments = call.arguments
        masker = self.masker
        masked = masker.flat_scalars(arguments)
        if masked is not None:
            # One flat object of text, integers, booleans and nulls (most calls): nothing deep,
            # no float, so the canonical bytes are taken as they are (canonical_json_bytes with
            # nothing foreign); a lone surrogate cannot be encoded (the long way judges it).
            try:
                canonical = canonical_json_bytes({"arguments": arguments, "tool": self.qualified}, None)  # call_text's
            except UnicodeEncodeError:
                return None
        else:
            try:
                text = canonical_json({"tool": self.qualified, "arguments": arguments})  # call_text(call)
            except RecursionError:
                return None
            if text.count("[") + text.count("{") > MAX_ARGUMENT_DEPTH:
                return None
            if not text.isascii() and LONE_SURROGATE.search(text) is not None:
                return None
            masked = masker.flat_arguments(arguments)
            if masked is None:
                if masker.with_arguments(arguments) is not masker:
                    return None
                masked = masker(arguments)
            canonical = text.encode("utf-8", "surrogatepass")
        digest = "hmac-sha256:" + hmac_sha256(self.key, canonical)  # policy.call_hash's
        action, rule, reason = self.decision  # type: ignore[misc]  # (authorize asks only when there is one)
        if telemetry._ACTIVE is not None:  # (policy_decision's test, without its call)
            telemetry.policy_decision(self.qualified, action, rule, self.caller)
        base = self.base.copy()
        base["arguments"], base["callHash"] = masked, digest
        # Authorization(...)'s fields, set here: its __init__ (nine arguments, a masking test)
        # was ~2,000 instructions a call
        authorized: Authorization = _new(calls.Authorization)
        authorized.call, authorized.decision = call, Decision(action, rule, reason, digest)
        authorized.base, authorized.masker, authorized.opened, authorized.approval = base, masker, None, None
        authorized.output_schema, authorized.durable_at, authorized.reason = self.output_schema, 0, self.reason
        return authorized


_new = object.__new__


def route_of(invocation: Invocation, key: tuple[str, str], tool: Tool) -> Route | None:
    """The Route of (server, tool) under the invocation, kept: None at its first call (a gateway
    host call's invocation makes one), and until the policy has judged the tool."""
    routes = invocation.routes
    if key not in routes:
        routes[key] = None
        return None
    profile = invocation.profile.profile
    known = invocation.verdicts.get((f"{key[0]}.{key[1]}", invocation.caller))
    if known is None or known[0] is not tool or known[1] is not profile.policy:
        return None
    access, ruled, needs = known[2]
    decision: tuple[str, str, str] | None = None
    if access.action == "deny":
        decision = (access.action, access.rule, access.reason)
    elif not (ruled or needs is not None or profile.lock):
        allowed = Decision("allow", access.rule, access.reason)
        if profile.guard.descriptions == "hide":
            allowed = calls._hidden(tool, allowed)
        decision = (allowed.action, allowed.rule, allowed.reason)
    route = routes[key] = Route(invocation, key, tool, decision)
    return route


def settled(invocation: Invocation, key: tuple[str, str], tool: Tool | None) -> Route | None:
    """The Route of a cleared (server, tool) whose decision stands for every later call of `tool`
    (authorize would take it), once made; None while each call is judged in full."""
    route = invocation.routes.get(key)
    if route is None or route.decision is None or tool is None or not route.holds(invocation, tool):
        return None
    return route

"""A decided call (Authorization: the policy's decision on a call or a read, and the base fields
of its audit records) and what authorize (services/calls.py) concludes alike of every cleared call
of one tool under one invocation (Route): a batch's thousand calls of a tool conclude it once, and
each call adds only what is its own (its arguments, masked, and its call hash). Out of calls.py,
at its 500 lines; calls.py imports them from here (no cycle: nothing here imports calls)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli import audit, policy, telemetry
from llmc_cli.config.secrets import Masker, masked_identity
from llmc_cli.errors import PolicyDenied
from llmc_cli.mcp.jsonrpc import LONE_SURROGATE
from llmc_cli.model import MAX_ARGUMENT_DEPTH, JSONObject, canonical_json, canonical_json_bytes, hmac_sha256
from llmc_cli.policy import Decision

if TYPE_CHECKING:
    from llmc_cli.model import Tool, ToolCall
    from llmc_cli.policy.approval import Approval
    from llmc_cli.services.invocation import Invocation
    from llmc_cli.services.reads import Read
    from llmc_cli.store.chain import AuditRecord


class Authorization:
    """A call (or a read) the policy has decided on, with the fields every audit record of it
    carries: `masker`, the invocation's and the values of this call's secret-looking arguments;
    `opened`, its entry in OPEN_CALLS once an allow decision is on disk; `approval`, for a
    confirmation nobody could give, what pre-approving the call takes. (A class with slots: no
    dataclass to create at import.)"""

    __slots__ = ("approval", "base", "call", "decision", "durable_at", "masker", "opened", "output_schema", "record")

    def __init__(
        self,
        call: ToolCall | Read,
        decision: Decision,
        base: AuditRecord,
        masker: Masker,
        opened: int | None = None,
        approval: Approval | None = None,
        output_schema: JSONObject | None = None,
        base_masked: bool = False,
    ) -> None:
        self.call = call
        self.decision = decision
        # masked once (here, unless the caller built it masked): every record of the call starts with it
        self.base = base if base_masked else masked(base, masker)
        self.masker = masker
        self.opened = opened
        self.approval = approval
        self.output_schema = output_schema  # the tool's, that its result is checked against
        self.durable_at = 0  # the audit log's mark to settle before anything of this call is shown (Pipeline.decide)
        self.record: AuditRecord | None = None  # the decision's audit record, when its maker built it (a Route's)

    def denied(self) -> PolicyDenied:
        """The error of a call the policy denied (the approval it would need attached)."""
        d = self.decision
        error = PolicyDenied(f"denied: {d.reason} [{d.rule}]", rule=d.rule, callHash=d.call_hash)
        error.approval = self.approval
        return error

    def decision_record(self) -> AuditRecord:
        """The decision's audit record, masked (the base fields were when the call was decided)."""
        return decision_records([self])[0]


# Record fields llmc writes itself (names, verdicts, numbers, hashes): never text a server or a
# person chose, and kept readable even where a short secret happens to equal one of them.
# "arguments" and "result" are masked where they are built, with the same masker.
NOT_FREE_TEXT = frozenset(
    {
        "time",
        "event",
        "decision",
        "outcome",
        "rule",
        "profile",
        "server",
        "tool",
        "command",
        "conversation",
        "user",
        "host",
        "pid",
        "durationMs",
        "resultBytes",
        "callHash",
        "resultSha256",
        "arguments",
        "result",
    }
)


def masked(record: AuditRecord, masker: Masker) -> AuditRecord:
    """Secret values masked in every free-text field (a reason or an error message may quote an
    argument or the environment), before the record is hashed into the chain."""
    out: AuditRecord = {  # type: ignore[assignment]
        k: v if k in NOT_FREE_TEXT else masked_identity(v, masker) if k == "client" else masker(v) for k, v in record.items()
    }
    tool = out.get("tool")
    if isinstance(tool, str):  # a server names its tools: a name may carry a secret it was given
        out["tool"] = masker.text(tool)
    return out


def decision_records(authorizations: list[Authorization]) -> list[AuditRecord]:
    """Each decision's audit record, masked (the base fields were when the call was decided), in
    one loop (no call a record)."""
    records: list[AuditRecord] = []
    for a in authorizations:
        out = a.record
        if out is None:
            d = a.decision
            out = a.base.copy()  # with_base's record, its fields known: only the reason is free text
            out["event"], out["decision"], out["rule"], out["reason"] = "decision", d.action, d.rule, a.masker(d.reason)
        records.append(out)
    return records


def hidden(tool: Tool, decision: Decision) -> Decision:
    """[guard] descriptions = "hide": a tool whose own metadata has a high finding is refused."""
    from llmc_cli.guard.scan import flagged

    rules = flagged([tool]).get(tool.qualified_name)
    if not rules:
        return decision
    reason = f"the metadata of {tool.qualified_name} addresses the model ({', '.join(rules)}): see llmc tools scan"
    return policy.Decision("deny", f"guard.descriptions: {rules[0]}", reason, decision.call_hash)


def record_base(invocation: Invocation, server: str, tool: str, masker: Masker) -> AuditRecord:
    """The base fields of a call's records but its arguments and callHash, as masked() would make
    them, in one dict of the fields that have a value (identity() is a fresh one): the client and
    the tool's name as masked() masks them, every other field one of NOT_FREE_TEXT (as it is)."""
    base: AuditRecord = audit.identity()  # type: ignore[assignment]
    base["profile"], base["command"] = invocation.profile.name, invocation.command
    if invocation.conversation_id is not None:
        base["conversation"] = invocation.conversation_id
    if invocation.client is not None:
        base["client"] = masked_identity(invocation.client, masker)  # type: ignore[typeddict-item]
    base["server"], base["tool"] = server, masker.text(tool) if isinstance(tool, str) else tool
    return base


class Route:
    """What authorize concludes alike of every cleared call of one tool under one invocation, made
    at its second call: the policy's decision where it reads nothing of the call (policy.decide's
    verdict of the tool, [guard] descriptions = "hide" on top), and the audit record's fields but
    the call's own (arguments, callHash), masked. Used while the tool and the policy are the very
    objects it was made of (held). `decision` is None where each call is judged in full: an
    argument rule names the tool, it needs a confirmation (the approvals read each call's hash),
    or the profile has a lock."""

    __slots__ = ("base", "caller", "decision", "key", "masker", "output_schema", "policy", "qualified", "record", "tool")

    def __init__(self, invocation: Invocation, key: tuple[str, str], tool: Tool, decision: tuple[str, str, str] | None) -> None:
        self.tool, self.policy, self.decision = tool, invocation.profile.profile.policy, decision
        self.qualified = f"{key[0]}.{key[1]}"  # call.qualified_name
        self.caller, self.key, self.masker = invocation.caller, invocation.approval_key, invocation.masker
        self.base = record_base(invocation, key[0], key[1], self.masker)
        # the decision record but the call's own fields (decision_records' record, its keys in
        # the same order): each call's is a copy with its arguments and hash
        self.record: dict[str, object] | None = None
        if decision is not None:
            action, rule, reason = decision
            fields = {"arguments": None, "callHash": None, "event": "decision", "decision": action, "rule": rule}
            self.record = {**self.base, **fields, "reason": self.masker(reason)}
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
        record = self.record.copy()  # type: ignore[union-attr]  # (made with the decision)
        record["arguments"], record["callHash"] = masked, digest
        # Authorization(...)'s fields, set here: its __init__ (nine arguments, a masking test)
        # was ~2,000 instructions a call
        authorized: Authorization = _new(Authorization)
        decision = _new(Decision)  # Decision(action, rule, reason, digest)'s fields: likewise
        decision.action, decision.rule, decision.reason, decision.call_hash = action, rule, reason, digest
        authorized.call, authorized.decision = call, decision
        authorized.base, authorized.masker, authorized.opened, authorized.approval = base, masker, None, None
        authorized.output_schema, authorized.durable_at = self.output_schema, 0
        authorized.record = record  # type: ignore[assignment]  # (the record's fields: an AuditRecord's)
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
            allowed = hidden(tool, allowed)
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

"""The decision on one call: decide(call) -> allow | deny | confirm, with the rule behind it; which
tools a profile may see; effective hints; the decision on reading a resource or getting a prompt
(decide_read), which is also what listings show of them."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from llmc_cli.config.profiles import expand
from llmc_cli.model import JSONObject, Tool, ToolCall, dataclass
from llmc_cli.policy.approval import call_hash

if TYPE_CHECKING:
    from llmc_cli.config.schema import PolicyConfig

# Who chose a call. A person who typed `llmc call` (or wrote a batch file) has decided; a call a
# model chose (`ask`, sampling, the gateway) is what confirm_destructive guards against.
Caller = Literal["human", "model"]
HUMAN: Caller = "human"
MODEL: Caller = "model"
# What decide_read judges: a resource by its URI, a resource template by its uriTemplate (listings
# only: a read names a URI), a prompt by its name.
ReadKind = Literal["resource", "template", "prompt"]

SPEC_DEFAULT_HINTS = {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True}


@dataclass
class Decision:
    action: str  # allow | deny | confirm
    rule: str  # which setting decided, e.g. "deny: fs.delete_*"
    reason: str
    call_hash: str | None = None

    def to_json(self) -> JSONObject:
        out = {"decision": self.action, "rule": self.rule, "reason": self.reason, "callHash": self.call_hash}
        return {k: v for k, v in out.items() if v is not None}


def effective_hints(tool: Tool | None, qualified: str, config: PolicyConfig) -> dict[str, bool]:
    hints = dict(SPEC_DEFAULT_HINTS)
    annotations = tool.annotations if tool else {}
    for key in hints:
        value = annotations.get(f"{key}Hint")
        if isinstance(value, bool):
            hints[key] = value
    for pattern, override in config.hints.items():
        if glob_match(pattern, qualified):
            hints.update({k: v for k in hints if (v := getattr(override, k)) is not None})
    if hints["readOnly"] and not any(glob_match(p, qualified) and o.destructive for p, o in config.hints.items()):
        hints["destructive"] = False  # the spec: destructiveHint is meaningful only when not read-only
    return hints


def visible(tool: Tool, config: PolicyConfig) -> Decision:
    """May this profile use this tool at all? (Listings and the model see only allowed tools.)"""
    return _access(tool.qualified_name, tool, config)


def is_read_only(tool: Tool | None, qualified: str, config: PolicyConfig) -> bool:
    """The one answer to "is this tool read-only?" under a profile: its annotations with the
    profile's [policy.hints] on top. `read_only` profiles, batch and `ask` parallelism all ask here."""
    return effective_hints(tool, qualified, config)["readOnly"]


# What decide() concludes of a tool before it looks at a call's arguments: (the tool and the
# policy it was judged under, (the access decision, whether an argument rule names the tool, the
# confirmation it needs or None)). Kept per command by whoever runs many calls (Verdicts).
_Verdict = tuple[Decision, bool, str | None]
Verdicts = dict[tuple[str, str], tuple["Tool | None", "PolicyConfig", _Verdict]]


def decide(
    call: ToolCall,
    tool: Tool | None,
    config: PolicyConfig,
    *,
    caller: Caller,
    cwd: str | Callable[[], str | None] | None = None,
    approved: Callable[[str], bool] | None = None,
    digest: str | None = None,
    verdicts: Verdicts | None = None,
) -> Decision:
    """The decision on one call. Deny, read-only and argument rules hold for every caller;
    `confirm` patterns too; `confirm_destructive` only for calls a model chose. `cwd`: the
    server's working directory when llmc knows it (relative path arguments are judged against
    it; unknown, they are refused under a path rule; a function: asked only when an argument
    rule names the tool). `approved`: hashes pre-approved outside
    the profile (the state database), asked only for a call that needs a confirmation.
    `digest`: call_hash(call), when the caller has it already. `verdicts`: what was concluded
    of this tool under this policy for an earlier call (a command's many calls): used while
    the tool and the policy are the very objects it was concluded of; the arguments, the
    argument rules and the approvals are judged for every call."""
    qualified = call.qualified_name
    digest = call_hash(call) if digest is None else digest
    known = verdicts.get((qualified, caller)) if verdicts is not None else None
    if known is not None and known[0] is tool and known[1] is config:
        access, ruled, needs = known[2]
    else:
        access, ruled, needs = _verdict(qualified, tool, config, caller)
        if verdicts is not None:
            verdicts[(qualified, caller)] = (tool, config, (access, ruled, needs))
    if access.action == "deny":
        return Decision(access.action, access.rule, access.reason, digest)
    if ruled:
        refusal = _argument_refusal(call, tool, config, cwd() if callable(cwd) else cwd)
        if refusal is not None:
            return Decision("deny", refusal[0], refusal[1], digest)
    if needs is None:
        return Decision("allow", access.rule, access.reason, digest)
    if digest in config.approved or (approved is not None and approved(digest)):
        return Decision("allow", "approved", f"this exact call is pre-approved ({needs})", digest)
    why = "the tool is destructive" if needs == "confirm_destructive" else f"it matches {needs[9:]}"
    return Decision("confirm", needs, f"{qualified} needs a confirmation: {why}", digest)


def _verdict(qualified: str, tool: Tool | None, config: PolicyConfig, caller: Caller) -> _Verdict:
    """What decide() concludes of a tool whatever the arguments: its access, whether an argument
    rule names it, the confirmation it needs."""
    access = _access(qualified, tool, config)
    ruled = any(glob_match(pattern, qualified) for pattern in config.args)
    hints = effective_hints(tool, qualified, config)
    needs = next((f"confirm: {p}" for p in config.confirm if glob_match(p, qualified)), None)
    if needs is None and caller == MODEL and config.confirm_destructive and hints["destructive"]:
        needs = "confirm_destructive"
    return access, ruled, needs


def _argument_refusal(call: ToolCall, tool: Tool | None, config: PolicyConfig, cwd: str | None) -> tuple[str, str] | None:
    """(rule, reason) of the first argument rule the call's arguments break, or None."""
    qualified = call.qualified_name
    for pattern, rules in config.args.items():
        if not glob_match(pattern, qualified):
            continue
        for arg, globs in rules.items():
            where = f"args.{pattern}.{arg}"
            if arg in call.arguments:
                value = call.arguments[arg]
            else:
                value = _schema_default(tool, arg)  # the server falls back to it: judge what it touches
                if value is None:
                    continue
            from llmc_cli.policy.paths import judge_argument  # only under an argument rule

            globs = [expand(g, f"policy.{where}") for g in globs]  # ${VAR} as in servers
            refusal = judge_argument(arg, value, globs, cwd)
            if refusal:
                return where, refusal
    return None


def _schema_default(tool: Tool | None, arg: str) -> Any:
    prop = tool.properties.get(arg) if tool else None
    return prop.get("default") if isinstance(prop, dict) else None


def _access(qualified: str, tool: Tool | None, config: PolicyConfig) -> Decision:
    denied = next((p for p in config.deny if glob_match(p, qualified)), None)
    if denied:
        return Decision("deny", f"deny: {denied}", f"{qualified} matches deny pattern {denied!r}")
    allowed = next((p for p in config.allow if glob_match(p, qualified)), None)
    if not allowed and config.default == "deny":
        return Decision("deny", "default: deny", f"{qualified} matches no allow pattern and the default is deny")
    if config.read_only and not is_read_only(tool, qualified, config):
        return Decision("deny", "read_only", f"the profile is read-only and {qualified} is not a read-only tool")
    return Decision(
        "allow",
        f"allow: {allowed}" if allowed else "default: allow",
        f"{qualified} is allowed" + (f" by {allowed!r}" if allowed else " by default"),
    )


def glob_match(pattern: str, text: str) -> bool:
    """Tool globs over `server.tool` (fnmatch). Path globs go through glob_patterns."""
    return fnmatch.fnmatchcase(text, pattern)


def decide_read(
    kind: ReadKind, server: str, name: str, config: PolicyConfig, tools: Callable[[], list[Tool]] | None = None
) -> Decision:
    """May this profile read this resource (see this template) or get this prompt? One answer for
    the read and for the listings: what is denied is also absent from resources/list,
    resources/templates/list and prompts/list. Reads are reads: `read_only` does not deny them,
    `confirm` patterns do not apply. In order, judged on `server.URI` (`server.NAME`):
    1. a tool deny pattern that covers the whole server (`server.*`, `*`) denies its resources
       and prompts too, whatever [policy.resources]/[policy.prompts] say;
    2. their `deny` globs, then their `allow` globs;
    3. their `default`; unset, deny when `allow` lists anything (an allow list means "only these");
    4. else what the tool rules say of the server: closed, and so denied, when `default = "deny"`
       and no allow pattern names the server, or when the server has tools and the deny/allow
       rules hide every one (read_only aside); open otherwise (a server without tools too).
    `tools`: the server's tools, asked only for step 4 when a tool rule could close the server.
    A resource's URI is judged normalised (policy/uris.py); one that cannot be is denied."""
    if kind == "resource":
        from llmc_cli.policy.uris import Unnormalisable, normalise

        try:
            name = normalise(name)  # a glob is judged on the URI as the server reads it: no `..` escapes it
        except Unnormalisable as exc:
            return Decision("deny", "resources: not normalisable", f"{server}.{name} cannot be judged: it holds {exc}")
    qualified = f"{server}.{name}"
    whole = whole_server_denial(server, config)
    if whole:
        return Decision("deny", f"deny: {whole}", f"server {server} is denied as a whole by tool pattern {whole!r}")
    section = "prompts" if kind == "prompt" else "resources"
    rules = config.prompts if kind == "prompt" else config.resources
    denied = next((p for p in rules.deny if glob_match(p, qualified)), None)
    if denied:
        return Decision("deny", f"{section}.deny: {denied}", f"{qualified} matches {section} deny pattern {denied!r}")
    allowed = next((p for p in rules.allow if glob_match(p, qualified)), None)
    if allowed:
        return Decision("allow", f"{section}.allow: {allowed}", f"{qualified} is allowed by {allowed!r}")
    if rules.default == "allow":
        return Decision("allow", f"{section}.default: allow", f"{qualified} is allowed by the {section} default")
    if rules.default == "deny" or rules.allow:
        why = "the default is deny" if rules.default == "deny" else "an allow list without a default allows only what it lists"
        return Decision("deny", f"{section}.default: deny", f"{qualified} matches no {section} allow pattern and {why}")
    closed = _closed_by_tool_rules(server, config, tools)
    if closed:
        return Decision(
            "deny",
            closed,
            f"the tool rules allow no tool of {server}, so neither its {section} (allow them in [policy.{section}])",
        )
    return Decision("allow", "default: allow", f"{qualified} is allowed by default")


# What denied_by_name concluded of a name: (the policy it was judged under, the denial or None).
# Kept per command, or per gateway clearance, by whoever asks for many calls (services Conclusions).
NameDenials = dict[str, tuple["PolicyConfig", "Decision | None"]]
_NAMED_MAX = 4096  # names a caller made up are judged, not kept without bound


def denied_by_name(
    qualified: str, config: PolicyConfig, digest: str | None = None, named: NameDenials | None = None
) -> Decision | None:
    """decide()'s denial of a call when its name alone settles it (a deny pattern; default deny
    and no allow pattern): judged before the server is asked for the tool, so a call the policy
    refuses by name starts no server (least privilege). The same decision decide() comes to.
    `named`: what was concluded of names for earlier calls, used while the policy is the very
    object it was judged under (a gateway call asks three times: its route, run, authorize)."""
    known = named.get(qualified) if named is not None else None
    if known is None or known[0] is not config:
        known = (config, _denial_by_name(qualified, config))
        if named is not None:
            if len(named) >= _NAMED_MAX:
                # Full of names a host made up (any host of the clearance may send any): start
                # afresh rather than keep the real tools' names out of it for good.
                named.clear()
            named[qualified] = known
    denial = known[1]
    return None if denial is None else Decision("deny", denial.rule, denial.reason, digest)


def _denial_by_name(qualified: str, config: PolicyConfig) -> Decision | None:
    access = _access(qualified, None, config)
    return None if access.action != "deny" or access.rule == "read_only" else access


def whole_server_denial(server: str, config: PolicyConfig) -> str | None:
    """The tool deny pattern that denies every name of the server (`server.*`, `*`), or None."""
    return next((p for p in config.deny if glob_match(p, f"{server}.") and glob_match(p, f"{server}.*")), None)


def _closed_by_tool_rules(server: str, config: PolicyConfig, tools: Callable[[], list[Tool]] | None) -> str | None:
    """The rule by which the tool rules leave nothing of the server usable, or None (step 4)."""

    def names_server(pattern: str) -> bool:  # could the pattern match some `server.tool`?
        head, dot, _ = pattern.partition(".")
        return glob_match(head, server) if dot else glob_match(pattern, f"{server}.")

    if config.default == "deny" and not any(names_server(p) for p in config.allow):
        return "default: deny"
    if config.default == "allow" and not any(names_server(p) or "." not in p for p in config.deny):
        return None  # no deny pattern can hide a tool of the server: no need to ask for its tools
    known = tools() if tools is not None else []
    if known and not any(_tool_rules_allow(t.qualified_name, config) for t in known):
        return f"tools of {server}: none allowed"
    return None


def _tool_rules_allow(qualified: str, config: PolicyConfig) -> bool:
    """The deny, allow and default rules alone (no read_only, no argument rules)."""
    if any(glob_match(p, qualified) for p in config.deny):
        return False
    return config.default == "allow" or any(glob_match(p, qualified) for p in config.allow)

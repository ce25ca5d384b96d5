"""The decision on one call: decide(call) -> allow | deny | confirm, with the rule behind it; which
tools a profile may see; effective hints."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

from llmc_cli.config.profiles import expand
from llmc_cli.model import Tool, ToolCall
from llmc_cli.policy.approval import call_hash
from llmc_cli.policy.paths import MAX_NESTING, PathRefused, glob_patterns, path_regex, touched_paths

if TYPE_CHECKING:
    from llmc_cli.config.schema import PolicyConfig

# Who chose a call. A person who typed `llmc call` (or wrote a batch file) has decided; a call a
# model chose (`ask`, sampling, the gateway) is what confirm_destructive guards against.
Caller = Literal["human", "model"]
HUMAN: Caller = "human"
MODEL: Caller = "model"

SPEC_DEFAULT_HINTS = {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True}


@dataclass
class Decision:
    action: str  # allow | deny | confirm
    rule: str  # which setting decided, e.g. "deny: fs.delete_*"
    reason: str
    call_hash: str | None = None

    def to_json(self) -> dict[str, Any]:
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


def decide(call: ToolCall, tool: Tool | None, config: PolicyConfig, *, caller: Caller, cwd: str | None = None,
           approved: Callable[[str], bool] | None = None) -> Decision:
    """The decision on one call. Deny, read-only and argument rules hold for every caller;
    `confirm` patterns too; `confirm_destructive` only for calls a model chose. `cwd`: the
    server's working directory when llmc knows it (relative path arguments are judged against
    it; unknown, they are refused under a path rule). `approved`: hashes pre-approved outside
    the profile (the state database), asked only for a call that needs a confirmation."""
    qualified = call.qualified_name
    access = _access(qualified, tool, config)
    digest = call_hash(call)
    if access.action == "deny":
        access.call_hash = digest
        return access
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
            globs = [expand(g, f"policy.{where}") for g in globs]  # ${VAR} as in servers
            refusal = _judge_argument(arg, value, globs, cwd)
            if refusal:
                return Decision("deny", where, refusal, digest)
    hints = effective_hints(tool, qualified, config)
    needs = next((f"confirm: {p}" for p in config.confirm if glob_match(p, qualified)), None)
    if needs is None and caller == MODEL and config.confirm_destructive and hints["destructive"]:
        needs = "confirm_destructive"
    if needs is None:
        return Decision("allow", access.rule, access.reason, digest)
    if digest in config.approved or (approved is not None and approved(digest)):
        return Decision("allow", "approved", f"this exact call is pre-approved ({needs})", digest)
    why = "the tool is destructive" if needs == "confirm_destructive" else f"it matches {needs[9:]}"
    return Decision("confirm", needs, f"{qualified} needs a confirmation: {why}", digest)


def _schema_default(tool: Tool | None, arg: str) -> Any:
    prop = ((tool.input_schema or {}).get("properties") or {}).get(arg) if tool else None
    return prop.get("default") if isinstance(prop, dict) else None


def _judge_argument(arg: str, value: Any, globs: list[str], cwd: str | None) -> str | None:
    """Why the value of a ruled argument is refused, or None. Every string inside it (lists and
    objects at any depth) must be a path under one of the globs; any other leaf (number, bool,
    null) is refused: a server could read it as a path or fall back to a default we cannot see."""
    patterns = [p for g in globs for p in glob_patterns(g, cwd)]
    try:
        leaves = list(_leaves(arg, value))
    except PathRefused as exc:
        return f"argument {arg} {exc}"
    for where, leaf in leaves:
        if not isinstance(leaf, str):
            return f"argument {where} is {json.dumps(leaf)}: under a path rule every value must be a string path"
        try:
            touched = touched_paths(leaf, cwd)
        except PathRefused as exc:
            return f"argument {where}={leaf!r} is refused: {exc}"
        for real in touched:
            if not any(path_regex(head, tail).match(real) for head, tail in patterns):
                return f"argument {where}={leaf!r} (resolved {real}) matches none of {globs}"
    return None


def _leaves(where: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if isinstance(value, (list, dict)) and depth >= MAX_NESTING:
        raise PathRefused(f"nests deeper than {MAX_NESTING} levels")  # no recursion a model can exhaust
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(f"{where}[{i}]", item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(f"{where}.{key}", item, depth + 1)
    else:
        yield where, value


def _access(qualified: str, tool: Tool | None, config: PolicyConfig) -> Decision:
    denied = next((p for p in config.deny if glob_match(p, qualified)), None)
    if denied:
        return Decision("deny", f"deny: {denied}", f"{qualified} matches deny pattern {denied!r}")
    allowed = next((p for p in config.allow if glob_match(p, qualified)), None)
    if not allowed and config.default == "deny":
        return Decision("deny", "default: deny", f"{qualified} matches no allow pattern and the default is deny")
    if config.read_only and not is_read_only(tool, qualified, config):
        return Decision("deny", "read_only", f"the profile is read-only and {qualified} is not a read-only tool")
    return Decision("allow", f"allow: {allowed}" if allowed else "default: allow",
                    f"{qualified} is allowed" + (f" by {allowed!r}" if allowed else " by default"))


def glob_match(pattern: str, text: str) -> bool:
    """Tool globs over `server.tool` (fnmatch). Path globs go through glob_patterns."""
    return fnmatch.fnmatchcase(text, pattern)

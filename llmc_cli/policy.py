"""Least privilege per profile: decide(call) -> allow | deny | confirm, with the rule behind it.

Configured in the profile's [policy] table (config/schema.py PolicyConfig):
- `default`, `allow`, `deny`: globs over `server.tool`; deny wins; a tool the profile may not
  use is also hidden from listings and from the model.
- `read_only`: only tools whose effective readOnlyHint is true. Effective hints are the tool's
  annotations with the profile's `hints` on top; missing annotations take the spec's defaults
  (not read-only, destructive, not idempotent, open world).
- `confirm` globs (every caller), and every effectively destructive tool when
  `confirm_destructive` (only calls a model chose: a command a person typed is its own
  confirmation): a human's yes, `--yes`, or the exact call pre-approved by its hash in `approved`.
- `args`: globs that string arguments must match, checked on normalised paths (`~`, `..`,
  symlinks resolved) so a denied path cannot be reached by spelling it differently.
- `calls_per_minute` and `tool_calls_per_minute`: enforced across processes (state dir + lock).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Callable, Literal

from llmc_cli.config.profiles import expand
from llmc_cli.errors import PolicyDenied
from llmc_cli.model import Tool, ToolCall

# Who chose a call. A person who typed `llmc call` (or wrote a batch file) has decided; a call a
# model chose (`ask`, sampling, the gateway) is what confirm_destructive guards against.
Caller = Literal["human", "model"]
HUMAN: Caller = "human"
MODEL: Caller = "model"

SPEC_DEFAULT_HINTS = {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True}
WINDOW_SECONDS = 60.0


@dataclass
class Decision:
    action: str  # allow | deny | confirm
    rule: str  # which setting decided, e.g. "deny: fs.delete_*"
    reason: str
    call_hash: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def call_hash(call: ToolCall) -> str:
    """Identity of one exact call: sha256 over canonical JSON of server.tool and arguments."""
    canonical = json.dumps({"tool": call.qualified_name, "arguments": call.arguments},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def effective_hints(tool: Tool | None, qualified: str, config: Any) -> dict[str, bool]:
    hints = dict(SPEC_DEFAULT_HINTS)
    annotations = tool.annotations if tool else {}
    for key in hints:
        value = annotations.get(f"{key}Hint")
        if isinstance(value, bool):
            hints[key] = value
    for pattern, override in config.hints.items():
        if glob_match(pattern, qualified):
            hints.update({k: v for k, v in asdict(override).items() if v is not None})
    if hints["readOnly"] and not any(glob_match(p, qualified) and o.destructive for p, o in config.hints.items()):
        hints["destructive"] = False  # the spec: destructiveHint is meaningful only when not read-only
    return hints


def visible(tool: Tool, config: Any) -> Decision:
    """May this profile use this tool at all? (Listings and the model see only allowed tools.)"""
    return _access(tool.qualified_name, tool, config)


def decide(call: ToolCall, tool: Tool | None, config: Any, *, caller: Caller) -> Decision:
    """The decision on one call. Deny, read-only and argument rules hold for every caller;
    `confirm` patterns too; `confirm_destructive` only for calls a model chose."""
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
            if arg not in call.arguments:
                continue
            value = call.arguments[arg]
            if not isinstance(value, str):
                return Decision("deny", f"args.{pattern}.{arg}", f"argument {arg} must be a string path", digest)
            normal = normalise_path(value)
            globs = [expand(g, f"policy.args.{pattern}.{arg}") for g in globs]  # ${VAR} as in servers
            if not any(glob_match(g, normal, path=True) for g in globs):
                return Decision("deny", f"args.{pattern}.{arg}",
                                f"argument {arg}={value!r} (resolved {normal}) matches none of {globs}", digest)
    hints = effective_hints(tool, qualified, config)
    needs = next((f"confirm: {p}" for p in config.confirm if glob_match(p, qualified)), None)
    if needs is None and caller == MODEL and config.confirm_destructive and hints["destructive"]:
        needs = "confirm_destructive"
    if needs is None:
        return Decision("allow", access.rule, access.reason, digest)
    if digest in config.approved:
        return Decision("allow", "approved", f"this exact call is pre-approved ({needs})", digest)
    why = "the tool is destructive" if needs == "confirm_destructive" else f"it matches {needs[9:]}"
    return Decision("confirm", needs, f"{qualified} needs a confirmation: {why}", digest)


def _access(qualified: str, tool: Tool | None, config: Any) -> Decision:
    denied = next((p for p in config.deny if glob_match(p, qualified)), None)
    if denied:
        return Decision("deny", f"deny: {denied}", f"{qualified} matches deny pattern {denied!r}")
    allowed = next((p for p in config.allow if glob_match(p, qualified)), None)
    if not allowed and config.default == "deny":
        return Decision("deny", "default: deny", f"{qualified} matches no allow pattern and the default is deny")
    if config.read_only and not effective_hints(tool, qualified, config)["readOnly"]:
        return Decision("deny", "read_only", f"the profile is read-only and {qualified} is not a read-only tool")
    return Decision("allow", f"allow: {allowed}" if allowed else "default: allow",
                    f"{qualified} is allowed" + (f" by {allowed!r}" if allowed else " by default"))


def normalise_path(value: str) -> str:
    """`~` expanded, relative paths anchored at the working directory, `..` and symlinks resolved
    (where they exist locally), so one file has one spelling."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(value)))


def glob_match(pattern: str, text: str, *, path: bool = False) -> bool:
    """Tool globs: fnmatch. Path globs: `*` stays within one path segment, `**` crosses them."""
    if not path:
        return fnmatch.fnmatchcase(text, pattern)
    return bool(_path_regex(normalise_glob(pattern)).match(text))


def normalise_glob(pattern: str) -> str:
    """The literal part before the first wildcard, resolved like the paths it is matched against."""
    cut = min((pattern.find(c) for c in "*?[" if c in pattern), default=len(pattern))
    head, tail = pattern[:cut], pattern[cut:]
    base = os.path.realpath(os.path.expanduser(head)) if head else ""
    if head.endswith("/") and not base.endswith("/"):
        base += "/"
    return base + tail


@lru_cache(maxsize=256)
def _path_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("/**", i) and (i + 3 == len(pattern)):
            out.append(r"(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


# -- rate limits ------------------------------------------------------------------------------------

def acquire_rate(profile_name: str, qualified: str, config: Any, state_dir: Callable[[], Any]) -> None:
    """Count this call against the profile's and the tool's per-minute limits, across every llmc
    process of this user (a JSON file in the state directory under a file lock). PolicyDenied
    with a retry-after hint when a limit is reached; nothing is counted then. `state_dir` is
    called only when a limit applies (most calls have none and touch no file)."""
    limits: list[tuple[str, int]] = []
    if config.calls_per_minute:
        limits.append((f"profile:{profile_name}", config.calls_per_minute))
    for pattern, limit in config.tool_calls_per_minute.items():
        if glob_match(pattern, qualified):
            limits.append((f"tool:{profile_name}:{pattern}", limit))
    if not limits:
        return
    from llmc_cli.config import files

    path = state_dir() / "ratelimit.json"
    with files.locked(path):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            state = {}  # missing or torn by an older llmc: start counting afresh
        if not isinstance(state, dict):
            state = {}
        now = time.time()
        for key, limit in limits:
            recent = [t for t in state.get(key) or [] if isinstance(t, (int, float)) and now - t < WINDOW_SECONDS]
            state[key] = recent
            if len(recent) >= limit:
                retry = max(0.1, WINDOW_SECONDS - (now - min(recent)))
                raise PolicyDenied(f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; "
                                   f"retry after {retry:.1f}s", retryAfter=round(retry, 1), rule=key)
        for key, _ in limits:
            state[key].append(now)
        # Counted before the call runs: if the count cannot be stored (ConfigError, exit 3), the
        # call does not run either, or a full disk would lift every limit.
        files.write_atomic(path, json.dumps(state))

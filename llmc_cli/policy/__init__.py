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
- `args`: path globs per argument. Every string under a ruled argument (in lists and objects
  too) must be a path under one of them, judged as the kernel walks it (touched_paths): a
  denied file cannot be reached by spelling it differently, relative paths start at the
  server's working directory (unknown: refused).
- `calls_per_minute` and `tool_calls_per_minute`: counted in the RateWindows the caller hands
  in (the command's state: a file under a lock, or the state database); policy never stores.
- `resources` and `prompts` ([policy.resources], [policy.prompts]): allow/deny globs over
  `server.URI` and `server.NAME`, judged by decide_read for reads and listings alike; a server
  whose tools the tool rules close entirely is closed for its resources and prompts too.

The package: rules.py (decide, visibility, hints), paths.py (paths as the kernel resolves them,
path globs), approval.py (the keyed call hash), rate.py (per-minute limits), lint.py (path-like
arguments no rule covers). The names below are its interface.
"""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

# Which module holds each name of the interface.
_WHERE = {
    name: module
    for module, names in {
        "llmc_cli.policy.approval": "APPROVAL_KEY_ENV APPROVAL_KEY_MIN_CHARS approval_key call_hash with_hint",
        "llmc_cli.policy.lint": "PATH_FORMATS PATH_WORDS uncovered_path_arguments",
        "llmc_cli.policy.paths": "MAX_NESTING MAX_SYMLINKS PathRefused glob_patterns touched_paths",
        "llmc_cli.policy.rate": "WINDOW_SECONDS acquire_rate",
        "llmc_cli.policy.rules": (
            "HUMAN MODEL SPEC_DEFAULT_HINTS Caller Decision ReadKind decide decide_read "
            "denied_by_name effective_hints glob_match is_read_only visible whole_server_denial Verdicts"
        ),
    }.items()
    for name in names.split()
}

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.policy.approval import APPROVAL_KEY_ENV, APPROVAL_KEY_MIN_CHARS, approval_key, call_hash, with_hint
    from llmc_cli.policy.lint import PATH_FORMATS, PATH_WORDS, uncovered_path_arguments
    from llmc_cli.policy.paths import MAX_NESTING, MAX_SYMLINKS, PathRefused, glob_patterns, touched_paths
    from llmc_cli.policy.rate import WINDOW_SECONDS, acquire_rate
    from llmc_cli.policy.rules import (
        HUMAN,
        MODEL,
        SPEC_DEFAULT_HINTS,
        Caller,
        Decision,
        ReadKind,
        Verdicts,
        decide,
        decide_read,
        denied_by_name,
        effective_hints,
        glob_match,
        is_read_only,
        visible,
        whole_server_denial,
    )
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)


__all__ = [
    "APPROVAL_KEY_ENV",
    "APPROVAL_KEY_MIN_CHARS",
    "approval_key",
    "call_hash",
    "with_hint",
    "PATH_FORMATS",
    "PATH_WORDS",
    "uncovered_path_arguments",
    "MAX_NESTING",
    "MAX_SYMLINKS",
    "PathRefused",
    "glob_patterns",
    "touched_paths",
    "WINDOW_SECONDS",
    "acquire_rate",
    "HUMAN",
    "MODEL",
    "SPEC_DEFAULT_HINTS",
    "Caller",
    "Decision",
    "ReadKind",
    "decide",
    "decide_read",
    "effective_hints",
    "glob_match",
    "is_read_only",
    "visible",
    "whole_server_denial",
    "denied_by_name",
    "Verdicts",
]

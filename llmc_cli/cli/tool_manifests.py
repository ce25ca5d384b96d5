"""`llmc tools export`, `lint`, `lock` and `diff`: the manifest translated, checked, pinned and
compared with its pin (loaded when one runs: cli/tools.py TOOLS)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from llmc_cli import lockfile, policy, services
from llmc_cli.cli.common import open_target
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, raise_failures
from llmc_cli.cli.targets import LocalPath, Target, target_options
from llmc_cli.cli.tool_listing import fail_on_warnings, grouped_warnings, translated_for
from llmc_cli.cli.tools import STRICT
from llmc_cli.config.profiles import load_profile, lock_path
from llmc_cli.errors import DriftError, ToolFailed
from llmc_cli.guard.clearance import human
from llmc_cli.model import LINT_FORMATS, TOOL_FORMATS

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile


def _profile_lock(profile: LoadedProfile) -> str:
    """The lock file `call` checks: the profile's `lock`, relative to the profile; else llmc.lock."""

    return lock_path(profile) if profile.profile.lock else "llmc.lock"


def _allowed_tools(ctx: click.Context, target: Target, hidden: bool = False) -> tuple[list[Any], list[Any], Any, Any, Any]:
    """(tools, failures, catalog, server infos, profile); with `hidden`, the tools [guard]
    descriptions = "hide" keeps from models too (the lock pins them, verdict and all)."""
    catalog, profile = open_target(ctx, target)
    with catalog:
        found, denied, failures = services.visible_tools(catalog, profile, list(target.servers) or None, human(profile.profile))
        if hidden:
            found += [t for t in denied if policy.visible(t, profile.profile.policy).action == "allow"]
        usable = services.usable_servers(catalog, profile, list(target.servers) or None, human(profile.profile))
        failed = {f.server for f in failures}
        infos = {
            name: catalog.session(name).server_info
            for name in (catalog.specs if usable is None else usable)
            if name not in failed
        }
    return found, failures, catalog, infos, profile


@click.command("export")
@format_option(*TOOL_FORMATS, required=True)
@click.option(
    "-o", "--output", type=LocalPath(dir_okay=False, allow_dash=True), required=True, help="File to write; - for stdout."
)
@STRICT
@target_options
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str, strict: bool, target: Target) -> None:
    """Translate the manifest for a provider and write it to a file (atomically), or with -o -
    to stdout."""
    found, failures, catalog, _, _ = _allowed_tools(ctx, target)
    result = translated_for(found, fmt, strict)
    fail_on_warnings(result, strict)
    raise_failures(failures, len(catalog.specs))
    definitions = result.definitions
    if isinstance(definitions, str):
        definitions = {"text": definitions}
    if output == "-":  # the translation itself is the output: no summary beside it
        emit(definitions)
        return
    lockfile.write(output, definitions)  # same atomic JSON writer as lock files
    # "warnings" as in every output: the notices themselves (the lines stderr showed), not a count
    emit({"file": output, "format": fmt, "toolCount": len(found), "warnings": grouped_warnings(result.warnings)})


@click.command("lint")
@click.option(
    "--provider",
    "providers",
    multiple=True,
    type=click.Choice(LINT_FORMATS),
    help="Only these providers (repeatable; default: all).",
)
@STRICT
@format_option(*FORMATS, listing=True)
@target_options
@click.pass_context
def lint(ctx: click.Context, providers: tuple[str, ...], strict: bool, fmt: str, target: Target) -> None:
    """What each provider would reject or lose, and why, and which path-like arguments of tools
    under a [policy.args] rule no rule covers (target "policy") (JSON). --strict: exit 1 on any
    finding."""
    from llmc_cli import translate
    from llmc_cli.services import caching

    found, failures, catalog, _, profile = _allowed_tools(ctx, target)
    findings = translate.lint(found, providers or LINT_FORMATS, strict=strict)
    findings += [
        translate.Finding(
            tool.qualified_name,
            f"$.inputSchema.properties.{arg}",
            "path-like argument that no [policy.args] rule covers",
            why,
            "policy",
        )
        for tool in found
        for arg, why in policy.uncovered_path_arguments(tool, profile.profile.policy)
    ]
    findings += [
        translate.Finding(
            tool.qualified_name,
            "$.annotations.readOnlyHint",
            "listed in [cache] tools but not read-only: never cached",
            "only tools read-only by their annotations and [policy.hints] "
            "are cached (a destructive or unannotated tool's calls are never answered from the cache)",
            "cache",
        )
        for tool in found
        if not caching.cacheable(tool, tool.qualified_name, profile.profile)
        and caching.verdict(tool, tool.qualified_name, profile.profile) is not None
    ]
    emit_listing(
        "findings",
        [f.to_json() for f in findings],
        fmt,
        [f.to_json() for f in failures],
        columns=["server", "tool", "target", "path", "what", "why"],
    )
    raise_failures(failures, len(catalog.specs))
    if strict and findings:
        raise ToolFailed(f"{len(findings)} portability finding(s)")


@click.command("lock")
@click.option(
    "-o",
    "--output",
    type=LocalPath(dir_okay=False),
    help="Lock file to write. Default: the profile's `lock` (relative to the profile), else llmc.lock.",
)
@target_options
@click.pass_context
def lock(ctx: click.Context, output: str | None, target: Target) -> None:
    """Pin every tool the policy allows (hash of name, description, schemas, annotations; the
    scan's verdict on them; server name and version)."""
    from llmc_cli.guard.scan import tool_verdict

    found, failures, catalog, infos, profile = _allowed_tools(ctx, target, hidden=True)
    output = output or _profile_lock(profile)
    raise_failures(failures, len(catalog.specs))  # never pin a partial manifest
    lockfile.write(output, lockfile.build(found, infos, tool_verdict))
    # counts are NOUNCount: "tools" and "servers" are lists of them in every other output
    emit({"file": output, "serverCount": len(infos), "toolCount": len(found)})


@click.command("diff")
@click.option(
    "--lock",
    "lock_path",
    type=LocalPath(dir_okay=False),
    help="Lock file to compare with. Default: the profile's `lock` (relative to the profile), else llmc.lock.",
)
@target_options
@click.pass_context
def diff(ctx: click.Context, lock_path: str | None, target: Target) -> None:
    """What was added, removed or changed since the lock (changed descriptions shown in full).
    Exit 10 on drift."""

    lock_path = lock_path or _profile_lock(load_profile(app_of(ctx).profile))
    pinned = lockfile.read(lock_path)
    from llmc_cli.guard.scan import tool_verdict

    found, failures, catalog, infos, _ = _allowed_tools(ctx, target, hidden=True)
    report = lockfile.diff(pinned, found, list(infos), tool_verdict)
    emit(report)
    raise_failures(failures, len(catalog.specs))
    if report["drift"]:
        raise DriftError(
            f"tools drifted from {lock_path}: {len(report['added'])} added, "
            f"{len(report['removed'])} removed, {len(report['changed'])} changed"
        )

"""`llmc policy check|approve`: explain a decision without running the tool (or reading the
resource, getting the prompt); pre-approve a call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from llmc_cli import policy as rules
from llmc_cli import services
from llmc_cli.cli.arguments import needs_schema, parse_json_option, parse_pairs
from llmc_cli.cli.common import open_target, tool_resolver
from llmc_cli.cli.output import emit, format_option, note, warn
from llmc_cli.cli.resources import read_target
from llmc_cli.cli.targets import Target, target_options
from llmc_cli.errors import ExitCode, UsageError
from llmc_cli.guard import clearance
from llmc_cli.model import ToolCall
from llmc_cli.services import caching

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.policy import Decision


@click.group()
def policy() -> None:
    """Explain and pre-approve policy decisions."""


def _decide(
    ctx: click.Context, tool: str, pairs: tuple[str, ...], json_args: str | None, target: Target, caller: str = "human"
) -> tuple[Any, Any, Any, Any]:

    if json_args and pairs:
        raise UsageError("give arguments either as KEY=VALUE pairs or with --json, not both")
    catalog, profile = open_target(ctx, target, warm=False)
    with catalog:
        server, name = tool_resolver(ctx, catalog, profile)(tool)
        found = catalog.require_tool(server, name)
        arguments = (
            parse_json_option(json_args) if json_args else parse_pairs(pairs, found.input_schema if needs_schema(pairs) else None)
        )

    state = services.open_state(profile)
    call = ToolCall(server, name, arguments)
    config = profile.profile.policy
    decision = rules.decide(
        call,
        found,
        config,
        caller=caller,  # type: ignore[arg-type]
        cwd=catalog.pool.working_directory(server),
        approved=state.approvals.is_approved,
    )
    decision = _cleared(profile, server, caller) or decision
    for arg, why in rules.uncovered_path_arguments(found, config):  # the hole `tools lint` reports too
        warn(f"argument {arg!r} of {call.qualified_name}: {why}")

    return (
        profile,
        state,
        call,
        (
            decision,
            rules.effective_hints(found, call.qualified_name, config),
            caching.verdict(found, call.qualified_name, profile.profile),
        ),
    )


ARGS = [
    click.argument("tool"),
    click.argument("pairs", nargs=-1, metavar="[KEY=VALUE | KEY:=JSON]..."),
    click.option("--json", "json_args", metavar="'{...}'|@FILE|-", help="All arguments as one JSON object."),
]


def _with_args(func: Any) -> Any:
    for decorator in reversed(ARGS):
        func = decorator(func)
    return func


@policy.command("check")
@_with_args
@click.option(
    "--caller",
    type=click.Choice(["human", "model"]),
    default="human",
    show_default=True,
    help="Who makes the call: a person's `llmc call`, or a model's (`ask`), which confirm_destructive also guards.",
)
@click.option(
    "--resource",
    "what",
    flag_value="resource",
    help="TOOL is a resource to read: SERVER.URI, as `resources read` takes it; SERVER:URI an alias ([policy.resources]).",
)
@click.option(
    "--prompt",
    "what",
    flag_value="prompt",
    help="TOOL is a prompt to get: SERVER.NAME, as `prompts get` takes it ([policy.prompts]).",
)
@format_option("json", "table", help="json: one document; table: one row for people.")
@target_options
@click.pass_context
def check(
    ctx: click.Context,
    tool: str,
    pairs: tuple[str, ...],
    json_args: str | None,
    caller: str,
    what: str | None,
    fmt: str,
    target: Target,
) -> None:
    """The decision for a call (or, with --resource or --prompt, a read), and why, without running
    it (JSON). Exit 4 unless allowed."""
    if what is not None:
        _check_read(ctx, what, tool, pairs, json_args, caller, target)
        return
    profile, _, call, (decision, hints, cache) = _decide(ctx, tool, pairs, json_args, target, caller)
    emit(
        {
            "profile": profile.name,
            "server": call.server,
            "tool": call.tool,
            "arguments": call.arguments,
            "caller": caller,
            **_levels(profile, call.server, caller),
            **decision.to_json(),
            "hints": hints,
            **({"cache": cache} if cache else {}),
        },
        fmt,
        columns=["server", "tool", "caller", "decision", "rule", "reason", *(["cache"] if cache else [])]
        if fmt == "table"
        else None,
    )
    if decision.action != "allow":
        ctx.exit(ExitCode.DENIED)


def _check_read(
    ctx: click.Context, what: str, name: str, pairs: tuple[str, ...], json_args: str | None, caller: str, target: Target
) -> None:
    """`policy check --resource|--prompt`: the decision services.read would take (read_decision)."""

    if what == "resource" and (pairs or json_args):
        raise UsageError("a resource read takes no arguments")
    arguments = parse_json_option(json_args) if json_args else parse_pairs(pairs, None)
    catalog, profile = open_target(ctx, target, warm=False)
    with catalog:
        server, rest = read_target(catalog, what, name)
        decision = services.read_decision(catalog, profile, what, server, rest)  # type: ignore[arg-type]
        decision = _cleared(profile, server, caller) or decision
    out: dict[str, Any] = {"profile": profile.name, "server": server, what: rest, **_levels(profile, server, caller)}
    if what == "prompt":
        out["arguments"] = {k: str(v) for k, v in arguments.items()}
    emit({**out, "caller": caller, **{k: v for k, v in decision.to_json().items() if k != "callHash"}})
    if decision.action != "allow":
        ctx.exit(ExitCode.DENIED)


def _levels(profile: LoadedProfile, server: str, caller: str) -> dict[str, str]:
    """The server's classification and the caller's clearance (guard/clearance.py): a person's
    ([policy] clearance) or the model's of `ask` ([llm] clearance)."""
    level = clearance.human(profile.profile) if caller == "human" else clearance.model(profile.profile)
    return {"classification": clearance.classification(profile.profile, server), "clearance": level}


def _cleared(profile: LoadedProfile, server: str, caller: str) -> Decision | None:
    """A clearance denial, as services.authorize would give it, or None."""
    level = _levels(profile, server, caller)["clearance"]
    if clearance.cleared(profile.profile, server, level):
        return None
    return rules.Decision("deny", "clearance", clearance.reason(profile.profile, server, level))


@policy.command("approve")
@_with_args
@click.option(
    "--write",
    is_flag=True,
    help="Add the hash to the profile's [policy] approved list (to the "
    "state database instead when [state] url or LLMC_STATE_URL is set).",
)
@target_options
@click.pass_context
def approve(ctx: click.Context, tool: str, pairs: tuple[str, ...], json_args: str | None, write: bool, target: Target) -> None:
    """The hash that pre-approves this exact call (tool and arguments), for pipelines that must
    run without a human: review once, then `--write` it into the profile (or the state database,
    which every machine using it reads)."""
    profile, state, call, (decision, _, _) = _decide(ctx, tool, pairs, json_args, target)
    digest = decision.call_hash
    if write:
        where = state.approvals.approve(digest, call.qualified_name)
        note(f"llmc: approved {call.qualified_name} with these exact arguments {where}")
    emit(
        {
            "profile": profile.name,
            "server": call.server,
            "tool": call.tool,
            "arguments": call.arguments,
            "callHash": digest,
            "written": write,
        }
    )

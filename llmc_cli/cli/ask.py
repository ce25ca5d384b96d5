"""`llmc ask "question"`: the profile's LLM uses the profile's tools, under its policy, audited."""

from __future__ import annotations

import sys
from typing import Any

import click

from llmc_cli import agent
from llmc_cli.agent import runs
from llmc_cli.cli.arguments import read_input
from llmc_cli.cli.common import command_calls, open_target
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import clean, emit, end_status, note, plain_text
from llmc_cli.cli.targets import Target, target_options
from llmc_cli.errors import TimeoutExpired, ToolFailed, UsageError
from llmc_cli.guard.clearance import model as model_clearance
from llmc_cli.model import PROVIDERS


@click.command()
@click.argument("prompt")
@click.option("--provider", type=click.Choice(PROVIDERS), help="Default: the profile's [llm] provider.")
@click.option("--model", help="Default: the profile's [llm] model.")
@click.option("--base-url", help="API base URL (any OpenAI-compatible server with --provider openai or text).")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key.")
@click.option("--temperature", type=float)
@click.option("--max-tokens", type=click.IntRange(min=1))
@click.option("--max-steps", type=click.IntRange(min=1), help="Model turns at most (default 10).")
@click.option("--total-timeout", type=click.FloatRange(min=1), metavar="SECONDS", help="The whole run (default 300).")
@click.option("--system", help="System prompt.")
@click.option("--save", "save_as", metavar="NAME", help="Save the conversation under this name (default: its id).")
@click.option(
    "--continue",
    "continue_from",
    metavar="NAME|last",
    help="Go on with a saved conversation; it is saved back under its name unless --save says otherwise.",
)
@click.option("--text", is_flag=True, help="Print only the answer.")
@click.option("--yes", "-y", is_flag=True, help="Answer yes to confirmations the policy asks for.")
@click.option("--strict", is_flag=True, help="OpenAI strict-mode tool schemas.")
@click.option(
    "--tool-search/--no-tool-search",
    default=None,
    help="The model first gets one tool, search_tools; the tools it finds join from its next turn. "
    "Default: the profile's [llm] tool_search, else on past 40 tools.",
)
@target_options
@click.pass_context
def ask(
    ctx: click.Context,
    prompt: str,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    temperature: float | None,
    max_tokens: int | None,
    max_steps: int | None,
    total_timeout: float | None,
    system: str | None,
    save_as: str | None,
    continue_from: str | None,
    text: bool,
    yes: bool,
    strict: bool,
    tool_search: bool | None,
    target: Target,
) -> None:
    """Ask the profile's LLM; it may use the tools the policy allows. PROMPT '-' reads stdin.

    Output: JSON with the answer, every step (tool, arguments, outcome, duration, what the model
    saw), token usage per model call and the stop reason; `--text` prints only the answer.
    Exit 1 when --max-steps ran out, 7 on the total timeout, 8 on a provider error.
    """

    if prompt == "-":
        prompt = read_input("-", "ask")
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    app = app_of(ctx)
    given = agent.AskOptions(
        provider=provider,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        temperature=temperature,
        max_tokens=max_tokens,
        max_steps=max_steps,
        total_timeout=total_timeout,
        system=system,
        tool_search=tool_search,
    )
    prepared = runs.prepare(given, app.load_profile().profile.llm, continue_from=continue_from, save_as=save_as)
    # warm=False: runs.run starts only the servers whose tools it has no cached listing of
    catalog, profile = open_target(ctx, target, sample=prepared.sample, warm=False)
    calls = command_calls(
        ctx,
        catalog,
        profile,
        "ask",
        caller="model",
        yes=yes,
        conversation_id=prepared.conversation.id,
        clearance=model_clearance(profile.profile, prepared.settings.provider),
    )
    # Steps on a terminal or with -v; a call that went wrong for the model is reported either way.
    show_steps = sys.stderr.isatty() or bool(app.verbose)

    # The model's text streams to a terminal as it arrives: with --text to stdout (it is the
    # output there), else to stderr (the JSON document follows on stdout). Into a pipe nothing
    # streams: the output is the same whole document either way.
    live = LiveText(sys.stdout) if text and sys.stdout.isatty() else LiveText(sys.stderr) if sys.stderr.isatty() else None

    def progress(event: dict[str, Any]) -> None:
        if live:
            live.end_line()
        line = agent.progress_line(event)
        if line and (show_steps or event.get("message")):
            note(line if show_steps else f"llmc: {line}")

    try:
        record, saved = runs.run(
            prepared,
            prompt,
            catalog,
            profile,
            calls,
            servers=list(target.servers) or None,
            progress=progress,
            strict=strict,
            on_text=live.write if live else None,
            on_unavailable=lambda error: note(f"llmc: {error.message} (its tools are not available to the model)"),
        )
    finally:
        if live:
            live.end_line()
    if text:
        if not (live and live.stream is sys.stdout and live.shown):  # streamed already
            plain_text(record.answer)
    else:
        emit({**record.to_json(), "saved": str(saved)})
    if record.stop_reason == agent.STOP_TIMEOUT:
        raise TimeoutExpired(f"the run reached its time limit after {len(record.steps)} tool call(s)")
    if record.stop_reason == agent.STOP_MAX_STEPS:
        raise ToolFailed(f"no answer within {prepared.settings.max_steps} model turns (--max-steps)")


class LiveText:
    """The model's text on a terminal as it arrives, cleaned of control characters like all text
    shown to people; end_line() ends a line left open (before a step line, at the end)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.open = False
        self.shown = False

    def write(self, piece: str) -> None:
        if piece:
            end_status()
            self.stream.write(clean(piece))
            self.stream.flush()
            self.open = not piece.endswith("\n")
            self.shown = True

    def end_line(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False

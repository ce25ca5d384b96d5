"""`llmc conversations list|show|rm`: the conversations `ask` saved in the state directory."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from llmc_cli import agent
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.errors import UsageError


@click.group()
def conversations() -> None:
    """List, show and remove saved conversations (`ask --save NAME`, `ask --continue NAME|last`)."""


@conversations.command("list")
@format_option(*FORMATS, listing=True)
def list_(fmt: str) -> None:
    """Every saved conversation, the most recently saved last: name, provider, model, turns,
    the first prompt, when it was created and last saved."""

    rows = []
    for path in agent.saved_conversations():
        try:
            conv = agent.load_conversation(path.stem)
        except Exception as exc:  # noqa: BLE001 - one unreadable file must not hide the others
            note(f"llmc: {getattr(exc, 'message', exc)}")
            continue
        rows.append(_conversation_summary(path.stem, conv, path.stat().st_mtime))
    emit_listing("conversations", rows, fmt, columns=["name", "turns", "provider", "model", "updated", "firstPrompt"])


@conversations.command()
@click.argument("name", metavar="NAME|last")
def show(name: str) -> None:
    """The whole conversation as saved: messages, and every run's record with full results."""

    path = agent.conversation_path(name)
    conv = agent.load_conversation(name)
    emit({"name": path.stem, **conv.to_json()})


@conversations.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME|last...")
def rm(names: tuple[str, ...]) -> None:
    """Remove saved conversations (each must exist: nothing is removed otherwise)."""

    paths = [agent.conversation_path(name) for name in names]
    missing = [name for name, path in zip(names, paths, strict=True) if not path.is_file()]
    if missing:
        raise UsageError(f"no saved conversation named {', '.join(repr(m) for m in missing)}")
    for path in dict.fromkeys(paths):
        path.unlink(missing_ok=True)
        note(f"llmc: removed conversation {path.stem}")
    emit({"removed": [p.stem for p in dict.fromkeys(paths)]})


def _conversation_summary(name: str, conv: Any, mtime: float) -> dict[str, Any]:

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")

    prompts = [run.get("prompt") for run in conv.runs if run.get("prompt")]
    return {
        "name": name,
        "id": conv.id,
        "provider": conv.provider,
        "model": conv.model,
        "turns": len(conv.runs),
        "messageCount": len(conv.messages),
        "firstPrompt": prompts[0] if prompts else None,
        "created": iso(conv.created),
        "updated": iso(mtime),
    }

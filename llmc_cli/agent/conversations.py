"""Saved conversations: JSON files in the state directory, one per conversation, continued by
name or as 'last'."""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmc_cli.config.files import write_atomic
from llmc_cli.config.paths import state_dir
from llmc_cli.errors import ConfigError, UsageError
from llmc_cli.model import dataclass
from llmc_cli.providers.base import Message, message_from_json


@dataclass
class Conversation:
    id: str
    provider: str
    model: str | None
    system: str | None = None
    messages: list[Message] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)  # every run's record, full results included
    created: float = field(default_factory=time.time)
    base_url: str | None = None  # where it was held (a local server): a continued one goes there too

    @classmethod
    def new(cls, provider: str, model: str | None, system: str | None = None, base_url: str | None = None) -> Conversation:
        return cls(id=uuid.uuid4().hex, provider=provider, model=model, system=system, base_url=kept_url(base_url))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "id": self.id,
            "provider": self.provider,
            "model": self.model,
            **({"baseUrl": self.base_url} if self.base_url else {}),
            "system": self.system,
            "created": self.created,
            "messages": [m.to_json() for m in self.messages],
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Conversation:
        return cls(
            id=d["id"],
            provider=d.get("provider") or "",
            model=d.get("model"),
            base_url=d.get("baseUrl") if isinstance(d.get("baseUrl"), str) else None,
            system=d.get("system"),
            messages=[message_from_json(m) for m in d.get("messages") or []],
            runs=list(d.get("runs") or []),
            created=d.get("created") or time.time(),
        )


def kept_url(url: str | None) -> str | None:
    """A base URL as a conversation keeps it: never one with userinfo or a query (either may
    hold a key, and secrets are not stored); such a URL is given again when continuing."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return None if parts.username or parts.password or parts.query or "${" in url else url


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def conversations_dir() -> Path:

    return state_dir() / "conversations"


def save_conversation(conv: Conversation, name: str | None = None) -> Path:
    """Write the conversation to conversations/NAME.json (NAME defaults to its id), atomically and
    readable only by the user (it holds tool results)."""

    name = name or conv.id
    check_name(name)
    path = conversations_dir() / f"{name}.json"
    # ASCII JSON: text with a lone surrogate (a model's or a server's) is stored, not a crash.
    write_atomic(path, json.dumps(conv.to_json()))
    return path


def check_name(name: str) -> None:
    """A name a conversation may be saved under, or a UsageError."""
    if not NAME_RE.match(name) or name == "last":
        raise UsageError(f"bad conversation name {name!r}: use letters, digits, '.', '_', '-' (not 'last')")


def conversation_path(name: str) -> Path:
    """conversations/NAME.json; for 'last', the most recently saved one."""
    folder = conversations_dir()
    if name == "last":
        saved = saved_conversations()
        if not saved:
            raise UsageError("no saved conversation")
        return saved[-1]
    if not NAME_RE.match(name):
        raise UsageError(f"bad conversation name {name!r}")
    return folder / f"{name}.json"


def load_conversation(name: str) -> Conversation:
    """conversations/NAME.json, or the most recently saved one for 'last'."""
    path = conversation_path(name)
    try:
        return Conversation.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise UsageError(f"no saved conversation named {name!r} (in {path.parent})") from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise UsageError(f"{path}: not a readable conversation ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def saved_conversations() -> list[Path]:
    """Every saved conversation, the most recently saved last."""
    folder = conversations_dir()
    return sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []

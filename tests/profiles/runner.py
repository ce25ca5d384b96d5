"""Profile files for tests: write one, quote a value for TOML."""

from __future__ import annotations

import json
from pathlib import Path


def write_profile(config: Path, text: str, name: str = "default") -> Path:
    path = config / "profiles" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string syntax is valid TOML for paths and commands)."""
    return json.dumps(value)

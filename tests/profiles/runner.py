"""Quoting a value for a test profile's TOML (tests/helpers.profile_file writes the profile)."""

from __future__ import annotations

import json


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string syntax is valid TOML for paths and commands)."""
    return json.dumps(value)

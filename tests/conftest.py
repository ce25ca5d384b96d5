"""Every test gets its own config and state directories and no developer credentials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import NODE_BIN

SECRET_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "LLMC_")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point config and state at a temp dir and drop credentials a developer may have set."""
    for name in list(os.environ):
        if name.startswith(SECRET_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LLMC_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LLMC_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


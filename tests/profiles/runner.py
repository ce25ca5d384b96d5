"""Run the real `llmc` entry point in-process (CliRunner's isolation: stdin/stdout/stderr
captured, environment patched), keeping main()'s error handling and exit codes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from llmc_cli.cli.main import main


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def llmc(*args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> Run:
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        result = Run(code, out.getvalue().decode(), err.getvalue().decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result


def write_profile(config: Path, text: str, name: str = "default") -> Path:
    path = config / "profiles" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string syntax is valid TOML for paths and commands)."""
    return json.dumps(value)

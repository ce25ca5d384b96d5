"""Every JSON output the tests see is checked against schemas/ (the output contract): the test
runner (tests.helpers) calls check_output for each run; validate_output is there for JSON a test
got another way (a pipe of its own, a terminal)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
# Presentation for people, or not JSON at all.
NOT_JSON_FORMATS = ("table", "text")


@functools.cache
def _registry() -> Any:
    from referencing import Registry, Resource

    return Registry().with_resources(
        (path.name, Resource.from_contents(json.loads(path.read_text(encoding="utf-8"))))
        for path in SCHEMAS.glob("*.schema.json")
    )


@functools.cache
def _validator(command: str, line: bool) -> Any:
    from jsonschema import Draft202012Validator

    target = f"{command}.schema.json" + ("#/$defs/line" if line else "")
    return Draft202012Validator({"$ref": target}, registry=_registry())


def validate_output(command: str, data: Any, *, line: bool = False) -> Any:
    """Fail unless `data` fits schemas/COMMAND.schema.json (its $defs/line for a JSON Lines
    line). COMMAND is the command path joined with '-' (tools-list). Returns data."""
    from jsonschema.exceptions import best_match

    assert (SCHEMAS / f"{command}.schema.json").is_file(), f"no schema for {command}: run scripts/gen_schemas.py"
    error = best_match(_validator(command, line).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        shown = json.dumps(error.instance, ensure_ascii=False)[:300]
        raise AssertionError(
            f"llmc {command.replace('-', ' ')}{' (a line)' if line else ''} breaks its output "
            f"schema at {where}: {error.message[:300]}\n  value: {shown}"
        )
    return data


def _takes_value(command: Any, token: str) -> bool | None:
    """Does this option of the command take a value? None: not an option it has."""
    name = token.split("=", 1)[0]
    for param in command.params:
        if name in getattr(param, "opts", []) + getattr(param, "secondary_opts", []):
            return "=" not in token and not (param.is_flag or param.count)
    return None


def command_of(args: list[str] | tuple[str, ...]) -> tuple[str, Any, list[str]] | None:
    """(command path joined with '-', the Click command, the arguments after its name) for an
    llmc argv, using the real Click tree; None for --help, --version or no command."""
    import click

    from llmc_cli.cli.main import cli

    command: Any = cli
    path: list[str] = []
    rest = list(args)
    while isinstance(command, click.Group) and rest:
        token = rest.pop(0)
        if token in ("-h", "--help", "--version"):
            return None
        if token.startswith("-"):
            if _takes_value(command, token) and rest:
                rest.pop(0)
            continue
        sub = command.get_command(click.Context(command), token)
        if sub is None:
            return None
        command, path = sub, [*path, token]
    if not path or (isinstance(command, click.Group) and not command.invoke_without_command):
        return None
    return "-".join(path), command, rest


def output_form(args: list[str] | tuple[str, ...]) -> tuple[str, bool] | None:
    """(schema name, is JSON Lines) of what this argv prints, or None when it prints no JSON
    (a table, --text, a completion script, MCP on stdio)."""
    found = command_of(args)
    if found is None:
        return None
    name, command, rest = found
    if any(a in ("-h", "--help") for a in rest) or not (SCHEMAS / f"{name}.schema.json").is_file():
        return None
    fmt, index = None, 0
    for param in command.params:
        if "--format" in getattr(param, "opts", []):
            fmt = param.default
    while index < len(rest):
        token = rest[index]
        if token == "--text":
            return None
        if token == "--format" and index + 1 < len(rest):
            fmt = rest[index + 1]
        elif token.startswith("--format="):
            fmt = token.split("=", 1)[1]
        index += 2 if token.startswith("-") and _takes_value(command, token) else 1
    if fmt in NOT_JSON_FORMATS:
        return None
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    lines_only = schema.get("$defs", {}).get("line") == {"$ref": "#"}
    return name, bool(fmt == "jsonl" or lines_only or (name == "call" and any(a.startswith("--batch") for a in rest)))


def check_output(args: list[str] | tuple[str, ...], stdout: str) -> None:
    """The run's stdout against the schema of the command it ran (each line for JSON Lines)."""
    form = output_form(args)
    if form is None or not stdout.strip():
        return
    name, is_lines = form
    if is_lines:
        for number, text in enumerate(stdout.splitlines(), 1):
            if text.strip():
                validate_output(name, _parse(text, f"line {number} of llmc {name}"), line=True)
    else:
        validate_output(name, _parse(stdout, f"llmc {name}"))


def _parse(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AssertionError(f"{what} printed no JSON ({exc}): {text[:300]!r}") from None

"""schemas/: one JSON Schema per command that prints JSON, generated from one definition
(llmc_cli/cli/output_schemas.py), strict where the shape is llmc's; the test runner holds every
output to it (tests/schemas.py)."""

from __future__ import annotations

import importlib.util
import json

import click
import pytest

from llmc_cli.cli import output_schema_parts, output_schemas
from tests.helpers import ROOT, llmc, sdk_server
from tests.schemas import SCHEMAS, output_form, validate_output

SDK = " ".join(sdk_server("sdk_server.py"))


def generator():
    spec = importlib.util.spec_from_file_location("gen_schemas", ROOT / "scripts" / "gen_schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> list[str]:
    """Every command of the Click tree that runs (a group only when it runs by itself)."""
    from llmc_cli.cli.main import cli

    found = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name), [*path, name])
            if not command.invoke_without_command:
                return
        found.append("-".join(path))

    walk(cli, [])
    return found


def test_the_schema_files_are_up_to_date():
    stale = generator().stale()
    assert stale == [], f"stale: {stale}; run: python scripts/gen_schemas.py"


def test_every_command_that_prints_json_has_a_schema_and_every_schema_a_command():
    commands = set(_commands())
    assert set(output_schemas.NOT_JSON) <= commands
    assert set(output_schemas.SCHEMAS) == commands - set(output_schemas.NOT_JSON)


@pytest.mark.parametrize("name", sorted(p.name for p in SCHEMAS.glob("*.json")))
def test_each_file_is_a_draft_2020_12_schema(name: str):
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


CALL = {"server": "sdk", "tool": "add", "content": [{"type": "text", "text": "3"}], "isError": False, "durationMs": 1.5}


def test_a_snake_case_key_a_missing_field_or_a_misshapen_error_fails():
    validate_output("call", CALL)
    with pytest.raises(AssertionError, match="duration_ms"):
        validate_output("call", {**{k: v for k, v in CALL.items() if k != "durationMs"}, "duration_ms": 1.5})
    with pytest.raises(AssertionError, match="'isError' is a required property"):
        validate_output("call", {k: v for k, v in CALL.items() if k != "isError"})
    error = {"server": "down", "error": "connection", "message": "refused", "exitCode": 5}
    validate_output("tools-list", {"tools": [], "errors": [error]})
    validate_output("tools-list", error, line=True)  # --format jsonl: errors are lines too
    with pytest.raises(AssertionError):
        validate_output("tools-list", {"server": "down", "error": "connection", "message": "refused", "exit_code": 5}, line=True)
    with pytest.raises(AssertionError):
        validate_output("tools-list", {"tools": []})  # no "errors"
    with pytest.raises(AssertionError):
        validate_output("audit-tail", {"time": "t", "prev": "p", "hash": "h", "call_hash": "x"}, line=True)


def test_every_detail_an_error_is_raised_with_is_in_the_error_schema():
    """The error shape is closed: a detail given to an exception anywhere in llmc_cli (as a
    keyword: PolicyDenied(..., retryAfter=...)) must be a camelCase field the schema lists."""
    import ast

    from llmc_cli import errors

    classes = {name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, errors.LlmcError)}
    given = set()
    for path in (ROOT / "llmc_cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in classes or name in ("AuditError", "StateError"):
                    given |= {k.arg for k in node.keywords if k.arg}
    assert given and given <= set(output_schema_parts.ERROR_DETAILS), given - set(output_schema_parts.ERROR_DETAILS)


def test_what_servers_send_stays_open():
    """An MCP tool or content block may carry fields llmc does not know (a newer spec, _meta)."""
    tool = {"server": "s", "name": "t", "inputSchema": {"type": "object"}, "x-vendor": {"a": 1}, "_meta": {}}
    validate_output("tools-list", {"tools": [tool], "errors": []})
    validate_output("call", {**CALL, "content": [{"type": "future", "payload": 1}], "structuredContent": {"a": 1}})
    validate_output("tools-list", [{"type": "function", "function": {"name": "s_t"}}])  # --format openai


@pytest.mark.parametrize(
    "argv, form",
    [
        (["tools", "list"], ("tools-list", False)),
        (["-p", "ops", "tools", "list", "-s", "fs", "--format", "jsonl"], ("tools-list", True)),
        (["tools", "list", "--format=openai"], ("tools-list", False)),
        (["call", "--batch", "calls.jsonl"], ("call", True)),
        (["audit", "tail", "-n", "5"], ("audit-tail", True)),
        (["serve", "token", "list", "-p", "ops"], ("serve-token-list", False)),
        (["call", "s.t", "--text"], None),
        (["tools", "show", "s.t", "--format", "table"], None),
        (["serve", "-p", "ops"], None),
        (["completion", "bash"], None),
        (["tools", "list", "--help"], None),
    ],
)
def test_the_runner_knows_each_argv_s_command_and_form(argv, form):
    assert output_form(argv) == form


def test_the_runner_checks_json_lines_line_by_line():
    run = llmc("tools", "list", "--format", "jsonl", "--stdio", SDK)
    assert run.returncode == 0, run.stderr
    assert {line["name"] for line in run.lines()} >= {"add", "echo"}

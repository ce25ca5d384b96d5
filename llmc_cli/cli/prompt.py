"""Questions to the person at the terminal: confirmations of tool calls and servers' elicitations.

A question can come from any thread: a tool call's worker in `ask` (read-only calls run in
parallel), or a server's request served beside the call that waits for it. So that each answer
belongs to the question shown with it:

- a question is asked while holding the terminal (output.prompt_turn): one question is visible at
  a time, and what other threads print meanwhile waits until it is answered;
- input typed before the question appeared is discarded, so the answer was typed after reading it;
- answers are read with os.read on fd 0, never through sys.stdin: a thread blocked in a buffered
  read holds the buffer's lock, and a Ctrl-C handled by the main thread then ended the process in
  "Fatal Python error: _enter_buffered_busy" (exit 134). With os.read nothing is held, and Ctrl-C
  at any question exits 130 like anywhere else.

Everything shown that a server or a model wrote passes through output.clean.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from typing import TYPE_CHECKING

import click

from llmc_cli import interrupts
from llmc_cli.cli.output import clean, prompt_turn
from llmc_cli.mcp.messages import JSON, JSONObject, object_at

if TYPE_CHECKING:
    from llmc_cli.model import Tool, ToolCall

MAX_ATTEMPTS = 5  # a question asked again after an answer it cannot take, at most this often
MAX_LINE = 64 * 1024  # bytes of one answer


def confirm_call(call: ToolCall, tool: Tool | None) -> bool:
    """Invocation.confirm: the exact call (server, tool, arguments) and its question, answered as one."""
    with prompt_turn():
        say(f"llmc: {call.server}.{call.tool} needs your confirmation. Arguments:")
        say(json.dumps(call.arguments, indent=2, ensure_ascii=False))
        return yes_no("Run it?", default=False)


def elicit(params: JSONObject) -> JSONObject:
    """ClientHooks.elicit: a server's question (elicitation/create) asked on the terminal, one
    field at a time, each with its description, whether it is required, and its default. An
    optional field left empty is left out. End of input cancels."""
    with prompt_turn():
        try:
            return _elicit(params)
        except EOFError:
            say("llmc: no answer (end of input): the server's question is cancelled")
            return {"action": "cancel"}


def _elicit(params: JSONObject) -> JSONObject:
    say("")
    say(f"The server asks: {params.get('message', '')}")
    if params.get("mode", "form") != "form":
        say(f"Open this URL to continue: {params.get('url', '')}")
        return {"action": "accept" if yes_no("Done?", default=False) else "decline"}
    if not yes_no("Answer?", default=True):
        return {"action": "decline"}
    schema = object_at(params, "requestedSchema")
    listed = schema.get("required")
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    content: JSONObject = {}
    for name, prop in object_at(schema, "properties").items():
        prop = prop if isinstance(prop, dict) else {}
        value = _field(name, prop, name in required)
        if value is not None:
            content[name] = value
    return {"action": "accept", "content": content}


def _field(name: str, prop: JSONObject, required: bool) -> JSON:
    """One field's answer, converted to its type; None for an optional field left empty."""
    label = str(prop.get("title") or name)
    if prop.get("description"):
        say(f"  {label}: {prop['description']}")
    choices = _choices(prop)
    if choices:
        say("  one of: " + ", ".join(f"{value}" + (f" ({title})" if title != value else "") for value, title in choices))
    kind = prop.get("type")
    default = prop.get("default")
    hint = "required" if required else "optional, Enter to leave it out"
    if default is not None:  # Enter takes the default: say so, and what it is
        hint = f"{'required' if required else 'optional'}; Enter = default {json.dumps(default, ensure_ascii=False)}"
    for _ in range(MAX_ATTEMPTS):
        answer = read_line(f"{label} ({hint}): ")
        if answer is None:
            raise EOFError
        if not answer.strip():
            if default is not None:
                return default
            if not required:
                return None
            say("  this field is required")
            continue
        try:
            return _convert(answer.strip(), kind, prop, choices)
        except ValueError as exc:
            say(f"  {exc}")
    raise EOFError  # no usable answer after MAX_ATTEMPTS: the form is cancelled


def _choices(prop: JSONObject) -> list[tuple[str, str]]:
    """(value, title) of an enum field: `enum` (+ `enumNames`), or `oneOf`/`anyOf` of consts;
    for a multi-select (type array) those of its items."""
    items = prop.get("items")
    source = items if prop.get("type") == "array" and isinstance(items, dict) else prop
    if isinstance(enum := source.get("enum"), list):
        enum_names = source.get("enumNames")
        names = enum_names if isinstance(enum_names, list) else []
        return [(str(v), str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(enum)]
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        return [(str(o["const"]), str(o.get("title") or o["const"])) for o in options if isinstance(o, dict) and "const" in o]
    return []


def _convert(text: str, kind: JSON, prop: JSONObject, choices: list[tuple[str, str]]) -> JSON:
    """The typed value of an answer, or ValueError saying what was expected."""
    if kind == "boolean":
        if text.lower() in ("y", "yes", "true"):
            return True
        if text.lower() in ("n", "no", "false"):
            return False
        raise ValueError("answer y or n")
    if kind == "array":
        values = [v.strip() for v in text.split(",") if v.strip()]
        allowed = {v for v, _ in choices}
        wrong = [v for v in values if allowed and v not in allowed]
        if wrong:
            raise ValueError(f"not a choice: {', '.join(wrong)}")
        if isinstance(least := prop.get("minItems"), int) and len(values) < least:
            raise ValueError(f"give at least {least}, separated by commas")
        if isinstance(most := prop.get("maxItems"), int) and len(values) > most:
            raise ValueError(f"give at most {most}")
        answers: list[JSON] = list(values)
        return answers
    if choices and text not in {v for v, _ in choices}:
        raise ValueError("answer one of: " + ", ".join(v for v, _ in choices))
    if kind in ("integer", "number"):
        try:
            value: int | float = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"expected {'an integer' if kind == 'integer' else 'a number'}") from None
        if isinstance(low := prop.get("minimum"), (int, float)) and value < low:
            raise ValueError(f"at least {low}")
        if isinstance(high := prop.get("maximum"), (int, float)) and value > high:
            raise ValueError(f"at most {high}")
        return value
    if isinstance(shortest := prop.get("minLength"), int) and len(text) < shortest:
        raise ValueError(f"at least {shortest} characters")
    if isinstance(longest := prop.get("maxLength"), int) and len(text) > longest:
        raise ValueError(f"at most {longest} characters")
    return text


def yes_no(question: str, default: bool) -> bool:
    """y or n; Enter takes the default; end of input is no."""
    for _ in range(MAX_ATTEMPTS):
        answer = read_line(f"{question} [{'Y/n' if default else 'y/N'}]: ")
        if answer is None:
            return False
        answer = answer.strip().lower()
        if not answer:
            return default
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        say("  answer y or n")
    return False


def say(text: str) -> None:
    """A line of a question (the caller holds the terminal)."""
    click.echo(clean(text), err=True)


def read_line(question: str) -> str | None:
    """Show the question (stderr) and read one line from fd 0; None at end of input."""
    _discard_typeahead()
    click.echo(clean(question), err=True, nl=False)
    # The main thread waits in read(2) for as long as the person takes: a signal handed to one of
    # the other threads (session readers, a tool's worker) must interrupt it all the same.
    on_main = threading.current_thread() is threading.main_thread()
    with interrupts.relayed_to_main_thread() if on_main else contextlib.nullcontext():
        return _read_answer()


def _read_answer() -> str | None:
    data = bytearray()
    while len(data) < MAX_LINE:
        byte = os.read(0, 1)  # one byte: never read past this line (the next answer's input)
        if not byte:
            if not data:
                click.echo("", err=True)
                return None
            break
        if byte == b"\n":
            break
        data += byte
    return data.decode("utf-8", "replace").rstrip("\r")


def _discard_typeahead() -> None:
    try:
        import termios
    except ImportError:  # not POSIX
        return
    try:
        termios.tcflush(0, termios.TCIFLUSH)
    except (termios.error, OSError):  # not a terminal: nothing typed ahead to drop
        pass

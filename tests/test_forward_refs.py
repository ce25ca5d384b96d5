"""llmc_cli.forward_refs_compiled_when_used (llmc_cli/__init__.py): the typing forward references
made while click imports compile their text when first evaluated, not as they are made. A
command's start-up then calls compile() on no text at all (the first call costs ~9 M
instructions, issue 34); whoever evaluates a reference gets typing's own answer."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from llmc_cli import forward_refs_compiled_when_used

NO_COMPILE = """
import builtins
seen = []
real = builtins.compile
def counting(source, filename, mode, *args, **kwargs):
    if mode != "exec":  # the import system compiles a module's source (no cached bytecode) in "exec"
        seen.append(source)
    return real(source, filename, mode, *args, **kwargs)
builtins.compile = counting
import llmc_cli.cli.main, llmc_cli.cli.call, llmc_cli.cli.tools
print(len(seen), seen[:3])
"""


def test_start_up_compiles_no_text() -> None:
    """Importing the root command, `call` and `tools` (click with them) compiles nothing: on
    the old code click's TypedDicts and TypeVar bounds compiled 26 texts."""
    proc = subprocess.run([sys.executable, "-c", NO_COMPILE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[0] == "0", proc.stdout


class Outside(typing.TypedDict):
    name: list[int]
    other: str | None


def test_references_made_in_the_block_evaluate_as_typing_s() -> None:
    with forward_refs_compiled_when_used():

        class Inside(typing.TypedDict):
            name: list[int]
            other: str | None

        bound = typing.TypeVar("bound", bound="dict[str, int]")
        made = typing.ForwardRef("list[int]")
    assert typing.ForwardRef is not type(made)  # typing is as it was after the block
    assert typing.get_type_hints(Inside) == typing.get_type_hints(Outside) == {"name": list[int], "other": str | None}
    plain = typing.ForwardRef("list[int]")
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain) == "ForwardRef('list[int]')"
    assert isinstance(made, typing.ForwardRef) and made.__forward_code__.co_names == plain.__forward_code__.co_names
    assert typing.get_type_hints(lambda x: None, localns={"T": bound}) == {}
    assert bound.__bound__ == typing.ForwardRef("dict[str, int]")
    assert bound.__bound__._evaluate(globals(), None, frozenset()) == dict[str, int]


def test_text_that_is_no_expression_fails_when_evaluated() -> None:
    with forward_refs_compiled_when_used():
        broken = typing.ForwardRef("not an expression(")
        unpacked = typing.ForwardRef("*tuple[int]")
    with pytest.raises(SyntaxError, match="Forward reference must be an expression -- got 'not an expression\\('"):
        broken._evaluate(globals(), None, frozenset())
    assert unpacked.__forward_code__.co_filename == "<string>"
    with pytest.raises(TypeError, match="must be a string"), forward_refs_compiled_when_used():
        typing.ForwardRef(3)  # type: ignore[arg-type]


def test_typing_is_restored_when_the_block_fails() -> None:
    before = typing.ForwardRef
    with pytest.raises(RuntimeError), forward_refs_compiled_when_used():
        raise RuntimeError("import failed")
    assert typing.ForwardRef is before

"""Path escapes through the real CLI: the installed llmc, a real MCP server that trusts its
arguments (tests/peers/naive_files.py journals every access before it happens), a real tree
with symlinks. A denied escape exits 4 and the server is never asked to touch anything; `ask`
runs calls in parallel only when the profile's policy (its [policy.hints]) says read-only."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import PEERS, llmc, profile_file


@pytest.fixture
def tree(isolated_dirs: Path) -> Path:
    root = isolated_dirs / "tree"
    (root / "allowed" / "a").mkdir(parents=True)
    (root / "allowed" / "notes.txt").write_text("fine\n")
    (root / "outside" / "etc").mkdir(parents=True)
    (root / "outside" / "etc" / "passwd").write_text("root:x:0:0\n")
    os.symlink(root / "outside" / "etc", root / "allowed" / "etc-link")
    os.symlink("c2", root / "allowed" / "c1")
    os.symlink("../outside/etc", root / "allowed" / "c2")
    os.symlink(root / "outside" / "new-file", root / "allowed" / "dangling")
    return root


def write_profile(isolated_dirs: Path, tree: Path, *, cwd: str | None = "allowed", extra: str = "") -> Path:
    journal = isolated_dirs / "journal.txt"
    journal.write_text("")
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.naive]
command = "{sys.executable}"
args = ["{PEERS / "naive_files.py"}"]
{f'cwd = "{tree / cwd}"' if cwd else ""}
env = {{ NAIVE_JOURNAL = "{journal}" }}

[policy]
confirm_destructive = false

[policy.args."naive.*"]
path = ["{tree}/allowed/**"]
paths = ["{tree}/allowed/**"]
{extra}
""",
    )
    return journal


# (tool, arguments ({root}: the tree), the server's cwd under the tree, or None: it has none)
ESCAPES = [
    ("read", {"path": "{root}/allowed/etc-link/../etc/passwd"}, "allowed"),  # `..` after a symlink
    ("read", {"path": "{root}/allowed/c1/passwd"}, "allowed"),  # a chain of links
    ("read", {"path": "etc/passwd"}, "outside"),  # relative at the server's cwd
    ("read", {"path": "../outside/etc/passwd"}, "allowed"),
    ("read", {"path": "etc/passwd"}, None),  # no cwd: llmc's, here outside
    ("read_many", {"paths": ["{root}/allowed/notes.txt", "{root}/allowed/etc-link/passwd"]}, "allowed"),
    ("read_many", {"paths": ["{root}/allowed/notes.txt", 3]}, "allowed"),
    ("write", {"path": "{root}/allowed/c1/passwd", "content": "pwned"}, "allowed"),
    ("write", {"path": "{root}/allowed/dangling", "content": "pwned"}, "allowed"),  # would create outside
    ("write", {"path": "file://{root}/outside/etc/passwd", "content": "pwned"}, "allowed"),
]


@pytest.mark.parametrize("tool,arguments,cwd", ESCAPES)
def test_an_escape_exits_4_and_the_server_touches_nothing(isolated_dirs, tree, monkeypatch, tool, arguments, cwd):
    journal = write_profile(isolated_dirs, tree, cwd=cwd)
    monkeypatch.chdir(tree / "outside")  # a server without `cwd` inherits llmc's
    filled = json.loads(json.dumps(arguments).replace("{root}", str(tree)))
    # --no-validate: some escapes do not fit the tool's schema (a number among paths), and the
    # policy, not argument validation, is what must stop them (a model's arguments are not validated).
    proc = llmc("call", f"naive.{tool}", "--no-validate", "--json", json.dumps(filled))
    assert proc.returncode == 4, proc.stderr
    assert "args.naive.*.path" in proc.stderr and "root:x" not in proc.stdout
    assert journal.read_text() == ""  # the server was never asked
    assert (tree / "outside" / "etc" / "passwd").read_text() == "root:x:0:0\n"
    assert not (tree / "outside" / "new-file").exists()


@pytest.mark.parametrize(
    "tool,arguments,cwd,touched",
    [
        ("read", {"path": "notes.txt"}, "allowed", "read notes.txt"),  # relative at the server's cwd
        ("read", {"path": "notes.txt"}, None, "read notes.txt"),  # ... inherited from llmc
        (
            "read_many",
            {"paths": ["{root}/allowed/notes.txt", "a/../notes.txt"]},
            "allowed",
            "read {root}/allowed/notes.txt\nread a/../notes.txt",
        ),
    ],
)
def test_paths_inside_run(isolated_dirs, tree, monkeypatch, tool, arguments, cwd, touched):
    journal = write_profile(isolated_dirs, tree, cwd=cwd)
    monkeypatch.chdir(tree / "allowed")
    filled = json.loads(json.dumps(arguments).replace("{root}", str(tree)))
    proc = llmc("call", f"naive.{tool}", "--json", json.dumps(filled))
    assert proc.returncode == 0, proc.stderr
    assert journal.read_text() == touched.replace("{root}", str(tree)) + "\n"


@pytest.mark.parametrize("command", ["ask", "batch"])
@pytest.mark.parametrize(
    "hint,together",
    [
        ("", True),  # annotated read-only, and the profile agrees: together
        ("readOnly = false", False),  # annotated read-only, the profile says not: one after the other
    ],
)
def test_parallelism_follows_the_profiles_hints(isolated_dirs, tree, command, hint, together):
    """`ask` (two calls in one model turn) and `call --batch --parallel 2` decide what runs at
    once by the same policy.is_read_only. Both calls wait (bounded) until two have started:
    concurrent calls overlap in the journal, sequential ones cannot. No timing is measured."""
    script = [
        turn("openai", calls=[("c1", "stamp", {"label": "a"}), ("c2", "stamp", {"label": "b"})]),
        turn("openai", text="done"),
    ]
    with FakeLLM("openai", script) as fake:
        journal = write_profile(isolated_dirs, tree, extra=f'[policy.hints."naive.stamp"]\n{hint}')
        path = isolated_dirs / "config" / "profiles" / "default.toml"
        path.write_text(path.read_text() + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n')
        if command == "ask":
            proc = llmc("ask", "stamp twice", env={"OPENAI_API_KEY": "k"})
        else:
            calls = "".join(
                json.dumps({"id": label, "tool": "naive.stamp", "arguments": {"label": label}}) + "\n" for label in "ab"
            )
            proc = llmc("call", "--batch", "-", "--parallel", "2", stdin=calls)
    assert proc.returncode == 0, proc.stderr
    lines = journal.read_text().splitlines()
    if together:
        assert sorted(lines[:2]) == ["start a", "start b"] and sorted(lines[2:]) == ["end a", "end b"]
    else:
        assert lines == ["start a", "end a", "start b", "end b"]

"""Who confirms: a command a person typed (`llmc call`, `call --batch`) is its own confirmation,
so `confirm_destructive` guards only calls a model chose (`ask`); the profile's `confirm`
patterns, deny, read-only and argument rules hold for every command. The SDK test server's
tools carry no annotations: destructive, as the spec says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import sent_results, turn
from tests.helpers import audit_trail, llmc, profile_file, sdk_server

ADD = ["sdk.add", "a=40", "b=2"]
BATCH_LINE = '{"id": 1, "tool": "sdk.add", "arguments": {"a": 40, "b": 2}}\n'


def write_profile(isolated_dirs: Path, policy: str, llm: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        f'[servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{sdk_server("sdk_server.py")[1]}"]\n{llm}\n[policy]\n{policy}\n',
    )


@pytest.mark.parametrize(
    "policy, argv, code",
    [
        # confirm_destructive (on by default) is about models: a typed call of a destructive tool runs
        ("", ["call", *ADD], 0),
        ("", ["call", "--batch", "-"], 0),
        ("", ["policy", "check", *ADD], 0),
        ("", ["policy", "check", *ADD, "--caller", "model"], 4),
        # patterns the profile lists in `confirm` apply to every command
        ('confirm = ["sdk.add"]', ["call", *ADD], 4),
        ('confirm = ["sdk.add"]', ["call", *ADD, "--yes"], 0),
        ('confirm = ["sdk.add"]', ["call", "--batch", "-"], 4),
        ('confirm = ["sdk.add"]', ["call", "--batch", "-", "--yes"], 0),
        ('confirm = ["sdk.add"]', ["policy", "check", *ADD], 4),
        # deny, read-only and argument rules: everywhere, --yes or not
        ('deny = ["sdk.add"]', ["call", *ADD, "--yes"], 4),
        ('deny = ["sdk.add"]', ["call", "--batch", "-", "--yes"], 4),
        ('default = "deny"', ["call", *ADD], 4),
        ("read_only = true", ["call", *ADD, "--yes"], 4),
        ('[policy.args."sdk.echo"]\nmessage = ["/srv/**"]', ["call", "sdk.echo", "message=/etc/passwd", "--yes"], 4),
    ],
)
def test_who_confirms(isolated_dirs, policy, argv, code):
    write_profile(isolated_dirs, policy)
    proc = llmc(*argv, stdin=BATCH_LINE if "--batch" in argv else None)
    assert proc.returncode == code, proc.stdout + proc.stderr
    if argv[0] == "policy":
        out = json.loads(proc.stdout)
        assert out["decision"] == ("allow" if code == 0 else "confirm")
        assert out["caller"] == (argv[argv.index("--caller") + 1] if "--caller" in argv else "human")
    elif code == 0:
        line = proc.stdout.splitlines()[0] if "--batch" in argv else proc.stdout
        out = json.loads(line)
        assert out["structuredContent"] == {"result": 42}
    else:
        assert "denied" in proc.stderr or '"denied"' in proc.stdout


def test_a_model_still_needs_a_confirmation_for_a_destructive_tool(isolated_dirs):
    """`ask`: the same call a person may type is refused when a model chose it (no terminal, no
    --yes), and the model is told how it could be approved; with --yes it runs."""
    script = [
        turn("openai", calls=[("c1", "add", {"a": 40, "b": 2})]),
        turn("openai", text="done"),
        turn("openai", calls=[("c2", "add", {"a": 40, "b": 2})]),
        turn("openai", text="42"),
    ]
    with FakeLLM("openai", script) as fake:
        write_profile(isolated_dirs, "", f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"')
        refused = llmc("ask", "add 40 and 2", env={"OPENAI_API_KEY": "k"})
        allowed = llmc("ask", "add 40 and 2", "--yes", env={"OPENAI_API_KEY": "k"})
    assert refused.returncode == 0 and allowed.returncode == 0, refused.stderr + allowed.stderr
    first, second = sent_results("openai", fake.requests[1].body)[0], sent_results("openai", fake.requests[3].body)[0]
    assert first["is_error"] and "confirm_destructive" in first["text"] and "no terminal" in first["text"]
    assert not second["is_error"] and "42" in second["text"]
    audit = audit_trail(isolated_dirs / "state")
    assert [(r["command"], r["decision"]) for r in audit if r["event"] == "decision"] == [("ask", "deny"), ("ask", "allow")]

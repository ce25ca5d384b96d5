"""Bad input and unwritable state: one line on stderr, the documented exit code, no traceback,
nothing half-written, no temp file left. Each variant is one line of a table; the real CLI with
a real stdio server (the SDK test peer)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.faults.conftest import fill, temp_files
from tests.helpers import PEERS, audit_trail, llmc

STDIO = ["--stdio", shlex.join([sys.executable, str(PEERS / "sdk_server.py")])]
DEPTH = 100_000
DEEP_ARRAYS = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECTS = '{"a":' * DEPTH + "1" + "}" * DEPTH
NOT_UTF8 = b'{"a": 1, "b": "caf\xe9"}'  # Latin-1, as an editor on another system saves it
DEEP_LINE = '{"tool": "add", "arguments": {"a": ' + DEEP_ARRAYS + "}}\n"


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and stderr.startswith("llmc: "), stderr
    return stderr


# (variant, files to create {name: bytes}, argv ({dir} is the test's directory), stdin, exit code)
BAD_INPUT: list[tuple[str, dict[str, bytes], list[str], bytes | None, int]] = [
    (
        "--json @file nested arrays",
        {"deep.json": DEEP_ARRAYS.encode()},
        ["call", "add", "--json", "@{dir}/deep.json", *STDIO],
        None,
        2,
    ),
    (
        "--json @file nested objects",
        {"deep.json": DEEP_OBJECTS.encode()},
        ["call", "add", "--json", "@{dir}/deep.json", *STDIO],
        None,
        2,
    ),
    (
        "--json @file 65 levels",
        {"deep.json": ('{"a":' + "[" * 64 + "]" * 64 + "}").encode()},
        ["call", "add", "--json", "@{dir}/deep.json", *STDIO],
        None,
        2,
    ),
    ("--json @file not UTF-8", {"args.json": NOT_UTF8}, ["call", "add", "--json", "@{dir}/args.json", *STDIO], None, 2),
    ("--json @file missing", {}, ["call", "add", "--json", "@{dir}/nothing.json", *STDIO], None, 2),
    ("--json - nested arrays", {}, ["call", "add", "--json", "-", *STDIO], DEEP_ARRAYS.encode(), 2),
    ("--json - not UTF-8", {}, ["call", "add", "--json", "-", *STDIO], NOT_UTF8, 2),
    ("--json literal not UTF-8", {}, ["call", "add", "--json", os.fsdecode(NOT_UTF8), *STDIO], None, 2),
    ("KEY:=JSON nested arrays", {}, ["call", "add", "a:=" + "[" * 60_000 + "]" * 60_000, *STDIO], None, 2),  # argv max 128k
    ("KEY=VALUE not UTF-8", {}, ["call", "echo", os.fsdecode(b"message=caf\xe9"), *STDIO], None, 2),
    (
        "--batch FILE not UTF-8",
        {"calls.jsonl": b'{"tool": "add", "arguments": {"a": 1, "b": 2}}\n' + NOT_UTF8 + b"\n"},
        ["call", "--batch", "{dir}/calls.jsonl", *STDIO],
        None,
        2,
    ),
    ("--batch - not UTF-8", {}, ["call", "--batch", "-", *STDIO], NOT_UTF8 + b"\n", 2),
    (
        "policy check --json @file nested",
        {"deep.json": DEEP_ARRAYS.encode()},
        ["policy", "check", "add", "--json", "@{dir}/deep.json", *STDIO],
        None,
        2,
    ),
    ("ask - not UTF-8", {}, ["ask", "-", "--provider", "openai", "--model", "m"], b"caf\xe9?", 2),
    ("ask prompt not UTF-8", {}, ["ask", os.fsdecode(b"caf\xe9?"), "--provider", "openai", "--model", "m"], None, 2),
    (
        "ask --system not UTF-8",
        {},
        ["ask", "hi", "--system", os.fsdecode(b"caf\xe9"), "--provider", "openai", "--model", "m"],
        None,
        2,
    ),
    ("servers add --url not UTF-8", {}, ["servers", "add", "x", "--url", os.fsdecode(b"http://127.0.0.1:9/\xe9")], None, 2),
    (
        "servers add --header not UTF-8",
        {},
        ["servers", "add", "x", "--url", "http://127.0.0.1:9/", "--header", os.fsdecode(b"X-A: \xe9")],
        None,
        2,
    ),
    (
        "servers import nested",
        {"mcp.json": ('{"mcpServers": ' + DEEP_ARRAYS + "}").encode()},
        ["servers", "import", "{dir}/mcp.json"],
        None,
        3,
    ),
    ("servers import not UTF-8", {"mcp.json": NOT_UTF8}, ["servers", "import", "{dir}/mcp.json"], None, 3),
    (
        "servers install --config nested",
        {"host.json": DEEP_OBJECTS.encode()},
        ["servers", "install", "--client", "cursor", "--config", "{dir}/host.json"],
        None,
        3,
    ),
    (
        "servers install --config not UTF-8",
        {"host.json": NOT_UTF8},
        ["servers", "install", "--client", "cursor", "--config", "{dir}/host.json"],
        None,
        3,
    ),
    (
        "tools diff --lock nested",
        {"llmc.lock": DEEP_ARRAYS.encode()},
        ["tools", "diff", "--lock", "{dir}/llmc.lock", *STDIO],
        None,
        3,
    ),
    ("tools diff --lock not UTF-8", {"llmc.lock": NOT_UTF8}, ["tools", "diff", "--lock", "{dir}/llmc.lock", *STDIO], None, 3),
]


@pytest.mark.parametrize("variant, created, argv, stdin, code", BAD_INPUT, ids=[v[0] for v in BAD_INPUT])
def test_bad_input_is_one_line_and_runs_nothing(variant, created, argv, stdin, code, isolated_dirs: Path) -> None:
    work = isolated_dirs / "work"
    work.mkdir()
    for name, data in created.items():
        (work / name).write_bytes(data)
    proc = llmc(*[a.replace("{dir}", str(work)) for a in argv], stdin=stdin, timeout=60)
    assert proc.returncode == code, proc.stderr
    one_line(proc.stderr)
    assert proc.stdout == ""
    state = isolated_dirs / "state"
    assert not (state / "audit.jsonl").exists()  # no call was decided, let alone run
    assert temp_files(isolated_dirs) == []


def test_a_batch_line_nested_too_deep_is_that_lines_error(isolated_dirs: Path) -> None:
    """A batch reports per line: the deep line is an error result (exit 2), the others run."""
    good = '{"tool": "add", "arguments": {"a": 1, "b": 2}}\n'
    proc = llmc("call", "--batch", "-", *STDIO, stdin=good + DEEP_LINE + good, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [("error" in line) for line in lines] == [False, True, False]
    assert "nested more than" in lines[1]["error"]["message"] and lines[1]["error"]["exitCode"] == 2


# (variant, how to break the state directory (given small_fs), argv)
UNWRITABLE: list[tuple[str, Callable[[Callable[..., Path]], Path], list[str]]] = [
    ("session start, read-only state", lambda mount: mount("state", read_only=True), ["session", "start", "held", *STDIO]),
    (
        "session start, state below a read-only dir",
        lambda mount: mount("ro", read_only=True) / "llmc",
        ["session", "start", "held", *STDIO],
    ),
    ("ask, read-only state", lambda mount: mount("state", read_only=True), ["ask", "hello"]),
    ("ask, full state", lambda mount: _full(mount("state")), ["ask", "hello"]),
    ("call, full state", lambda mount: _full(mount("state")), ["call", "add", "a=1", "b=2", *STDIO]),
]


def _full(point: Path) -> Path:
    fill(point)
    return point


@pytest.mark.parametrize("variant, broken, argv", UNWRITABLE, ids=[v[0] for v in UNWRITABLE])
def test_unwritable_state_is_exit_3(variant, broken, argv, small_fs, isolated_dirs: Path) -> None:
    state = broken(small_fs)
    profile = isolated_dirs / "p.toml"
    with FakeLLM("openai", [turn("openai", text="hi")]) as fake:
        profile.write_text(f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n')
        proc = llmc("-p", str(profile), *argv, env={"LLMC_STATE_DIR": str(state), "OPENAI_API_KEY": "k"}, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert str(state) in one_line(proc.stderr)
    assert fake.requests == []  # no token spent on an answer that could not be kept
    assert temp_files(state.parent) == []


def test_a_full_disk_at_the_rate_limit_runs_nothing_and_records_why(small_fs, isolated_dirs: Path) -> None:
    """The decision (allow) is logged, then ratelimit.json cannot be written: the call does not
    run (a full disk must not lift a limit), the outcome says so, exit 3, no temp file."""
    state = small_fs("state")
    audit_log = isolated_dirs / "audit.jsonl"
    profile = isolated_dirs / "limited.toml"
    profile.write_text(f'audit_log = "{audit_log}"\n[policy]\ncalls_per_minute = 5\n')
    first = llmc("-p", str(profile), "call", "add", "a=1", "b=2", *STDIO, env={"LLMC_STATE_DIR": str(state)})
    assert first.returncode == 0, first.stderr
    before = (state / "ratelimit.json").read_text()
    fill(state)
    proc = llmc("-p", str(profile), "call", "add", "a=1", "b=2", *STDIO, env={"LLMC_STATE_DIR": str(state)})
    assert proc.returncode == 3, proc.stderr
    assert "ratelimit.json" in one_line(proc.stderr)
    assert (state / "ratelimit.json").read_text() == before
    assert temp_files(state) == []
    records = audit_trail(audit_log.parent)
    assert [r.get("outcome") or r["decision"] for r in records[-2:]] == ["allow", "denied"]


def test_caches_that_cannot_be_written_cost_nothing_and_leave_nothing(small_fs, isolated_dirs: Path) -> None:
    """A full state directory: `tools list` still works (servers.json, the completion and
    profile caches are only caches), and no temp file of theirs is left behind."""
    state = _full(small_fs("state"))
    proc = llmc("tools", "list", *STDIO, env={"LLMC_STATE_DIR": str(state)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "add" in {t["name"] for t in json.loads(proc.stdout)["tools"]}
    assert temp_files(state) == []
    assert not (state / "servers.json").exists() and not (state / "completion-tools.json").exists()


DEEP_ARGUMENTS = [("100k levels", '{"message": ' + DEEP_ARRAYS + "}"), ("65 levels", '{"message": ' + "[" * 64 + "]" * 64 + "}")]


@pytest.mark.parametrize("api", ["openai", "openai-responses", "text"])
@pytest.mark.parametrize("label, raw", DEEP_ARGUMENTS, ids=[d[0] for d in DEEP_ARGUMENTS])
def test_a_model_sending_arguments_nested_too_deep_gets_an_error_back(api, label, raw, isolated_dirs: Path) -> None:
    """The call is not run; the model hears why and answers; ask ends normally (no RecursionError
    in the agent, the audit masking or the conversation file)."""
    script = [turn(api, calls=[("c1", "sdk_echo", raw)]), turn(api, text="gave up")]
    with FakeLLM(api, script) as fake:
        profile = isolated_dirs / "p.toml"
        profile.write_text(
            f'[servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{PEERS / "sdk_server.py"}"]\n'
            f'[llm]\nprovider = "{api}"\nmodel = "m"\nbase_url = "{fake.base_url}"\n'
        )
        proc = llmc("-p", str(profile), "ask", "echo something", env={"OPENAI_API_KEY": "k"}, timeout=90)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["answer"] == "gave up"
    assert [s["outcome"] for s in out["steps"]] == ["invalid"]
    assert "nested more than 64 levels" in json.dumps(fake.requests[1].body)
    assert (
        not (isolated_dirs / "state" / "audit.jsonl").exists()
        or "sdk.echo" not in (isolated_dirs / "state" / "audit.jsonl").read_text()
    )  # nothing decided, nothing ran

"""Output for people and for programs, through the installed CLI: a listing is a table when
stdout is a terminal and JSON when it is piped (--format > LLMC_FORMAT > [output] format >
terminal), the same data and exit code either way; per-server progress on a terminal's stderr
only; a batch that went wrong ends with one summary line; the workspace's --text is the content."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import llmc, llmc_executable, profile_file, sdk_server
from tests.terminal import Terminal

SDK = sdk_server("sdk_server.py")
HOSTILE = shlex.join(sdk_server("hostile_text.py"))


def write_profile(config: Path, extra: str = "") -> Path:
    return profile_file(
        config,
        f"""
[servers.sdk]
command = {json.dumps(SDK[0])}
args = {json.dumps(SDK[1:])}
[servers.other]
command = {json.dumps(SDK[0])}
args = {json.dumps(SDK[1:])}
[policy]
confirm_destructive = false
deny = ["other.fail"]
{extra}""",
    )


@pytest.fixture
def profile(isolated_dirs: Path) -> Path:
    path = write_profile(isolated_dirs / "config")
    assert llmc("serve", "token", "create", "ci").returncode == 0  # a principal to list
    assert llmc("call", "sdk.echo", "message=hi").returncode == 0  # an audit record to list
    return path


def on_terminal(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """llmc with stdout and stderr on one pseudo-terminal: (exit status, what the screen shows)."""
    with Terminal(*argv, env=env, stdout_on_terminal=True) as term:
        code = term.wait()
        return code, shown(term.screen)


def shown(screen: str) -> str:
    """The lines as they stand when llmc is done: a carriage return goes back to the start of the
    line and ESC[2K erases it (the progress line), as a terminal does."""
    lines = screen.replace("\r\n", "\n").split("\n")
    return "\n".join(line.rpartition("\r")[2].replace("\x1b[2K", "") for line in lines)


def is_table(text: str) -> bool:
    """A header, then its rule of dashes (two columns at least), and no JSON."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"-+( +-+)+ *", line)]
    return bool(rules) and rules[0] >= 1 and not text.lstrip().startswith(("{", "["))


# Every listing command, each with something to list in `profile`.
LISTINGS = [
    ["tools", "list"],
    ["tools", "lint"],
    ["resources", "list"],
    ["resources", "templates"],
    ["prompts", "list"],
    ["ping"],
    ["servers", "list"],
    ["profiles", "list"],
    ["serve", "token", "list"],
    ["audit", "tail"],
    ["session", "list"],
    ["conversations", "list"],
    ["auth", "status"],
]
EMPTY_HERE = {
    "resources templates": "resource templates",
    "session list": "sessions",
    "conversations list": "conversations",
    "auth status": "logins",
}


@pytest.mark.parametrize("argv", LISTINGS, ids=[" ".join(a) for a in LISTINGS])
@pytest.mark.e2e  # a terminal: what only a process shows
def test_a_listing_is_a_table_on_a_terminal_and_json_when_piped(profile: Path, argv: list[str]) -> None:
    piped = llmc(*argv)
    code, screen = on_terminal(*argv)
    assert code == piped.returncode, screen  # presentation only: the same exit code
    key = " ".join(argv)
    if key in EMPTY_HERE:
        assert piped.stdout.strip().startswith("{" if key != "audit tail" else "")
        assert f"llmc: no {EMPTY_HERE[key]}" in screen and "{" not in screen, screen
        return
    assert is_table(screen), screen
    data = piped.stdout if key == "audit tail" else json.loads(piped.stdout)
    assert data, piped.stdout
    if key != "audit tail":
        assert not is_table(piped.stdout) and "errors" in data


@pytest.mark.e2e  # a terminal: what only a process shows
def test_the_table_holds_the_same_rows_as_the_json(profile: Path) -> None:
    listed = json.loads(llmc("tools", "list").stdout)["tools"]
    _, screen = on_terminal("tools", "list")
    rows = [line.split()[:2] for line in screen.splitlines()[2:] if line.strip()]
    assert rows == [[t["server"], t["name"]] for t in listed]


@pytest.mark.e2e  # a terminal: what only a process shows
def test_json_is_pinned_on_a_terminal_by_the_flag_the_environment_or_the_profile(profile: Path) -> None:
    for argv, env in ((["--format", "json"], None), ([], {"LLMC_FORMAT": "json"})):
        code, screen = on_terminal("tools", "list", *argv, env=env)
        assert code == 0 and json.loads(screen)["tools"], screen
    write_profile(profile.parent.parent, '[output]\nformat = "json"\n')
    code, screen = on_terminal("servers", "list")
    assert code == 0 and [s["name"] for s in json.loads(screen)["servers"]] == ["sdk", "other"]
    profile_file(profile.parent.parent, '[servers.x]\ncommand = "true"\n[output]\nformat = "table"\n', name="people")
    assert is_table(on_terminal("servers", "list", "-p", "people")[1])  # -p after the subcommand picks it
    # precedence: the flag, then the environment, then the profile
    assert is_table(on_terminal("servers", "list", env={"LLMC_FORMAT": "table"})[1])
    assert json.loads(on_terminal("servers", "list", "--format", "json", env={"LLMC_FORMAT": "table"})[1])
    # JSON asked of a command that prints JSON Lines: its JSON Lines
    code, screen = on_terminal("audit", "tail")
    assert code == 0 and all(json.loads(line)["hash"] for line in screen.splitlines() if line.strip())


def test_a_table_is_forced_when_piped_and_a_bad_format_variable_is_a_usage_error(profile: Path) -> None:
    assert is_table(llmc("tools", "list", "--format", "table").stdout)
    by_env = subprocess.run(
        [llmc_executable(), "tools", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LLMC_FORMAT": "table"},
        stdin=subprocess.DEVNULL,
    )
    assert by_env.returncode == 0 and is_table(by_env.stdout)
    bad = llmc("tools", "list", env={"LLMC_FORMAT": "yaml"})
    assert bad.returncode == 2 and bad.stdout == "" and "LLMC_FORMAT" in bad.stderr


@pytest.mark.e2e  # a terminal: what only a process shows
def test_a_single_result_stays_json_on_a_terminal(profile: Path) -> None:
    code, screen = on_terminal("call", "sdk.echo", "message=hi")
    assert code == 0 and json.loads(screen)["content"] == [{"type": "text", "text": "hi"}]
    code, screen = on_terminal("policy", "check", "sdk.echo", "message=hi")
    assert code == 0 and json.loads(screen)["decision"] == "allow"
    code, screen = on_terminal("policy", "check", "other.fail", "--format", "table")
    assert code == 4 and is_table(screen) and "deny" in screen


@pytest.mark.e2e  # a terminal: what only a process shows
def test_a_table_fits_the_terminal_and_shows_control_characters(isolated_dirs: Path) -> None:
    code, screen = on_terminal("tools", "list", "--stdio", HOSTILE, env={"COLUMNS": "70"})
    assert code == 0 and is_table(screen)
    assert all(len(line) <= 70 for line in screen.splitlines()), screen
    assert "…" in screen and "\\x1b" in screen and "\x1b]" not in screen


@pytest.mark.e2e  # a terminal: what only a process shows
def test_a_failed_server_is_a_line_on_stderr_beside_the_table(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.sdk]
command = {json.dumps(SDK[0])}
args = {json.dumps(SDK[1:])}
[servers.gone]
command = "/nonexistent/server"
""",
    )
    code, screen = on_terminal("tools", "list")
    assert code == 5 and is_table(screen) and re.search(r"^llmc: .*gone", screen, re.M), screen


@pytest.mark.e2e  # a terminal: what only a process shows
def test_progress_across_servers_on_a_terminal_and_none_when_piped(profile: Path) -> None:
    with Terminal("tools", "list") as term:  # stderr on the terminal, stdout a pipe
        term.expect("tools list: 0/2 servers (waiting: sdk, other)")
        assert term.wait() == 0
        assert json.loads(term.stdout)["tools"]
        assert term.screen.endswith("\r\x1b[2K"), repr(term.screen[-80:])  # the line cleared at the end
    piped = llmc("tools", "list")
    assert piped.returncode == 0 and piped.stderr == ""


def test_a_batch_that_went_wrong_ends_with_one_summary_line(profile: Path) -> None:
    calls = [
        {"id": 1, "tool": "sdk.echo", "arguments": {"message": "a"}},
        {"id": 2, "tool": "sdk.fail", "arguments": {}},
        {"id": 3, "tool": "other.fail", "arguments": {}},
        {"id": 4, "tool": "sdk.add", "arguments": {"a": 1, "b": 2}},
    ]
    proc = llmc("call", "--batch", "-", stdin="\n".join(map(json.dumps, calls)))
    assert proc.returncode == 4 and len(proc.stdout.splitlines()) == 4
    assert proc.stderr.splitlines()[-1] == "llmc: 4 calls: 2 ok, 1 denied, 1 failed"
    fast = llmc("call", "--batch", "-", "--fail-fast", stdin="\n".join(map(json.dumps, calls[1:2] + calls[:1] * 2)))
    assert fast.returncode == 1 and fast.stderr.splitlines()[-1] == "llmc: 3 calls: 0 ok, 1 failed, 2 skipped"
    fine = llmc("call", "--batch", "-", stdin=json.dumps(calls[0]))
    assert fine.returncode == 0 and fine.stderr == ""


@pytest.mark.e2e  # a terminal: what only a process shows
def test_an_interrupted_batch_counts_what_did_not_finish(profile: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "\n".join(
            json.dumps(c)
            for c in [
                {"id": 1, "tool": "sdk.echo", "arguments": {"message": "a"}},
                {"id": 2, "tool": "sdk.slow", "arguments": {"seconds": 60}},
                {"id": 3, "tool": "sdk.echo", "arguments": {"message": "b"}},
            ]
        )
    )
    with Terminal("call", "--batch", str(calls)) as term:
        term.expect("[progress]")  # the slow call runs
        term.interrupt()
        assert term.wait() == 130
    lines = shown(term.screen).splitlines()
    summary = next(line for line in lines if line.startswith("llmc: 3 calls: "))
    assert re.fullmatch(r"llmc: 3 calls: (1 ok, 2|0 ok, 3) interrupted", summary), summary
    assert lines.index(summary) < lines.index("llmc: interrupted")


def test_names_that_agree(profile: Path) -> None:
    check = json.loads(llmc("policy", "check", "sdk.echo", "message=x").stdout)
    assert check["decision"] == "allow" and "action" not in check
    approve = json.loads(llmc("policy", "approve", "sdk.echo", "message=x").stdout)
    assert approve["callHash"] and "hash" not in approve
    shown = json.loads(llmc("tools", "show", "sdk.echo").stdout)
    assert shown["policy"]["human"]["decision"] == "allow"
    added = json.loads(llmc("servers", "add", "x", "--", "true").stdout)
    assert added["profile"] == "default" and added["path"] == str(profile)
    # a count is NOUNCount: "tools" and "servers" are the lists themselves everywhere
    locked = json.loads(llmc("tools", "lock", "-o", str(profile.parent / "t.lock"), "-s", "sdk").stdout)
    assert (locked["serverCount"], "tools" in locked) == (1, False) and locked["toolCount"] > 5


def test_servers_list_reports_a_server_that_cannot_be_configured_under_errors(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.sdk]
command = {json.dumps(SDK[0])}
args = {json.dumps(SDK[1:])}
[servers.api]
url = "https://api.invalid/mcp"
headers = {{ Authorization = "Bearer ${{LLMC_TEST_UNSET_TOKEN}}" }}
""",
    )
    proc = llmc("servers", "list")
    listed = json.loads(proc.stdout)
    assert proc.returncode == 0 and [s["name"] for s in listed["servers"]] == ["sdk", "api"]
    assert [(e["server"], e["exitCode"]) for e in listed["errors"]] == [("api", 3)]
    assert "LLMC_TEST_UNSET_TOKEN" in proc.stderr
    clean = json.loads(llmc("servers", "list", "-p", str(write_profile(isolated_dirs / "other"))).stdout)
    assert clean["errors"] == []


def test_text_of_workspace_tools_is_the_content(isolated_dirs: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "notes.txt").write_text("first line\nsecond line\n")
    (work / "docs" / "a.md").write_text("# title\nnotes here\n")

    def text(*argv: str) -> str:
        proc = llmc("call", *argv, "--text", cwd=work)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert text("workspace.read_file", "path=notes.txt") == "first line\nsecond line\n"
    assert (
        text("workspace.read_file", "path=notes.txt", "length=1")
        == "first line\n\n[notes.txt: lines 1-1 of 2; continue with offset=1]\n"
    )
    assert text("workspace.list_directory").splitlines() == ["docs/", "notes.txt"]
    assert text("workspace.list_directory", "depth=2").splitlines() == ["docs/", "docs/a.md", "notes.txt"]
    found = text("workspace.start_search", "pattern=notes", "kind=content", "wait_ms=5000").splitlines()
    assert [line.split(":", 1)[1] for line in found] == ["2:notes here"] and found[0].endswith("a.md:2:notes here")
    assert text("workspace.start_search", "pattern=*.md", "wait_ms=5000").strip().endswith("a.md")
    both = text("workspace.read_multiple_files", 'paths:=["notes.txt", "missing.txt"]')
    assert both.startswith("==> notes.txt <==\nfirst line\n") and "==> missing.txt <==\n[error: " in both
    # the JSON keeps every field scripts read, in structuredContent
    result = json.loads(llmc("call", "workspace.read_file", "path=notes.txt", cwd=work).stdout)
    assert result["structuredContent"]["content"] == "first line\nsecond line\n"
    assert result["structuredContent"]["totalLines"] == 2 and result["content"][0]["text"] == "first line\nsecond line\n"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ('{"a":"plain text"}', '{"a":"plain text"}'),  # ASCII: as it is
        ('{"a":"del\x7f"}', '{"a":"del\\u007f"}'),  # DEL is ASCII, and still escaped
        ('{"a":"c1\x85 rtl\u202e ls\u2028"}', '{"a":"c1\\u0085 rtl\\u202e ls\\u2028"}'),
        ('{"a":"café ✓"}', '{"a":"café ✓"}'),  # other text as it is
    ],
)
def test_json_lines_escape_what_acts_on_a_terminal(raw: str, shown: str) -> None:
    from llmc_cli.cli.output import json_line

    assert json_line(json.loads(raw)) == shown

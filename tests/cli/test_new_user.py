"""Issue 39, "Errors that lead somewhere": each mistake a new user makes is one line with the
documented exit code, said before any server starts when the input alone shows it."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import free_port, llmc, profile_file, sdk_server


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def marked_server(marker: Path, *extra: str) -> str:
    """A stdio server's TOML keys: the SDK test server, run by a shell that leaves a line in
    `marker` when it starts (so a test sees whether a command started it)."""
    line = f"echo started >> {shlex.quote(str(marker))}; exec {shlex.join([*sdk_server('sdk_server.py'), *extra])}"
    return f'command = "sh"\nargs = ["-c", {json.dumps(line)}]\n'


@pytest.fixture
def two_servers(isolated_dirs: Path) -> Path:
    """A profile with `everything` and `other` (both the SDK server) and a disabled `spare`;
    returns the marker file their starts write to."""
    marker = isolated_dirs / "started"
    profile_file(
        isolated_dirs / "config",
        "[servers.everything]\n"
        + marked_server(marker, "--dotted-tool")
        + "\n[servers.other]\n"
        + marked_server(marker)
        + "\n[servers.spare]\n"
        + marked_server(marker)
        + "enabled = false\n",
    )
    return marker


def test_tools_export_without_format_is_usage_before_any_server(two_servers: Path) -> None:
    proc = llmc("tools", "export", "-o", "x.json")
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_line(proc.stderr)
    assert "Missing option '--format'" in line and "openai" in line and "--help" in line
    assert not two_servers.exists()


def test_a_server_part_close_to_a_server_is_usage_at_once(two_servers: Path) -> None:
    proc = llmc("call", "everythin.get-sum", "a=1", "b=2")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "there is no server 'everythin' (did you mean 'everything'?)" in one_line(proc.stderr)
    assert not two_servers.exists()  # nothing started


def test_a_disabled_server_says_so_and_how_to_enable_it(two_servers: Path) -> None:
    proc = llmc("call", "spare.echo", "message=hi")
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "server spare is disabled" in line and "llmc servers enable spare" in line and "-s spare" in line
    assert not two_servers.exists()
    named = llmc("call", "-s", "spare", "spare.echo", "message=hi")  # and the way it names works
    assert named.returncode == 0, named.stderr


def test_a_dotted_tool_name_is_found_through_the_cache(two_servers: Path) -> None:
    first = llmc("call", "notes.get", "key=k")  # no cache yet: the servers are asked
    assert first.returncode == 0 and first.json()["server"] == "everything", first.stderr
    two_servers.unlink()
    again = llmc("call", "notes.get", "key=k")  # the cache knows it: only its server starts
    assert again.returncode == 0, again.stderr
    assert two_servers.read_text().splitlines() == ["started"]
    two_servers.unlink()
    unknown = llmc("call", "zzz.get", "key=k")  # the cache knows every server's tools: no start
    assert unknown.returncode == 2 and "there is no server 'zzz'" in one_line(unknown.stderr)
    assert not two_servers.exists()


@pytest.mark.parametrize("bound", [2.0, 4.0])
def test_connect_timeout_bounds_the_whole_connect(bound: float) -> None:
    """A server that never answers: the handshake (probe, then initialize) ends at the bound,
    not at twice it."""
    silent = f"{sys.executable} -c 'import time; time.sleep(60)'"
    started = time.monotonic()
    proc = llmc("call", "--connect-timeout", str(bound), "--stdio", silent, "x.y")
    took = time.monotonic() - started
    assert proc.returncode == 7, proc.stderr
    assert f"within {bound:g}s" in proc.stderr
    assert took < bound * 1.5 + 1.0, took  # it was 2 x bound (+0.4 s)


def test_ask_against_a_dead_base_url_names_it(isolated_dirs: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = llmc("ask", "--provider", "openai", "--model", "m", "--base-url", url, "-s", "workspace", "hi")
    assert proc.returncode == 8
    assert f"connection to {url}" in proc.stderr.strip().splitlines()[-1]


def test_no_model_is_usage_and_no_key_is_configuration(isolated_dirs: Path) -> None:
    no_model = llmc("ask", "--provider", "anthropic", "hi")
    assert no_model.returncode == 2 and "no model given" in one_line(no_model.stderr)
    no_key = llmc("ask", "--provider", "anthropic", "--model", "claude-x", "hi")
    assert no_key.returncode == 3 and "set $ANTHROPIC_API_KEY" in one_line(no_key.stderr)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[servers.x]\ncommand = "a"\nargz = ["b"]\n', "servers.x.argz: unknown key (did you mean 'args'?)"),
        ('[llm]\nmodle = "m"\n', "llm.modle: unknown key (did you mean 'model'?)"),
        ("[polcy]\n", "polcy: unknown key (did you mean 'policy'?)"),
    ],
)
def test_an_unknown_profile_key_gets_did_you_mean(tmp_path: Path, text: str, expected: str) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(text)
    proc = llmc("-p", str(profile), "servers", "list")
    assert proc.returncode == 3 and expected in one_line(proc.stderr)

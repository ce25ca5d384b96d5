"""Third-party stdio servers in bubblewrap (README "Sandboxing servers"), run for real: a hostile
`mcp` SDK server (tests/peers/sandbox_prober.py) tries llmc's approval key, its audit trail, the
profile that governs it, the user's ~/.ssh, a loopback TCP port and a fork bomb; the npm
reference servers, Desktop Commander and an SDK server still do their work inside."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PEERS, audit_trail, desktop_commander, llmc, node_tool, sdk_server
from tests.sandbox.conftest import BWRAP

pytestmark = [
    pytest.mark.e2e,  # servers under bubblewrap, npm peers and Desktop Commander
    pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (scripts/test.sh installs it)"),
]

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- fake"


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prober_profile(path: Path, table: str) -> Path:
    path.write_text(
        f"[servers.p]\ncommand = {json.dumps(sdk_server('sandbox_prober.py')[0])}\n"
        f"args = [{json.dumps(str(PEERS / 'sandbox_prober.py'))}]\n{table}",
        encoding="utf-8",
    )
    return path


def tool(profile: Path, name: str, **args: Any) -> str:
    result = llmc("-p", str(profile), "call", "--yes", f"p.{name}", "--json", json.dumps(args))
    assert result.returncode == 0, result.stderr
    return str(result.json()["structuredContent"]["result"])


@pytest.fixture
def fake_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home, beside (not inside) the test's directory, with a private key in ~/.ssh."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def listener() -> Any:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def llmc_files(tmp_path: Path) -> dict[str, Path]:
    state = Path(os.environ["LLMC_STATE_DIR"])
    return {"key": state / "approval.key", "trail": state / "audit.jsonl"}


def test_hostile_server_is_refused_everything_and_still_answers(tmp_path: Path, fake_home: Path, listener: int) -> None:
    """The server may read and write all of the test's directory, which holds llmc's config and
    state directories and the profile file: those stay covered; the home directory and the
    network are not there at all; a fork bomb runs out of processes. Each try is refused, and
    the server answers the next call."""
    work = tmp_path / "work"
    work.mkdir()
    profile = prober_profile(tmp_path / "p.toml", f'sandbox = "bwrap"\nwrite_paths = {toml_list([str(tmp_path)])}\n')
    assert "APPENDED" in tool(profile, "append", path=str(work / "notes.txt"), text="mine")  # the declared path works
    assert (work / "notes.txt").read_text() == "mine"
    from llmc_cli.policy.approval import approval_key

    approval_key()  # the key exists, as on any machine that approved a call
    files = llmc_files(tmp_path)
    assert files["key"].exists() and files["trail"].exists()
    for secret in (files["key"], files["trail"], profile):
        got = tool(profile, "read", path=str(secret))
        assert got.startswith("DENIED") or got == "", (secret, got)  # absent, or an empty cover
    before = profile.read_text()
    assert tool(profile, "append", path=str(profile), text='\n[policy]\ndefault = "allow"\n').startswith("DENIED")
    assert profile.read_text() == before
    assert tool(profile, "append", path=str(files["key"]), text="x").startswith("DENIED")
    assert tool(profile, "read", path=str(fake_home / ".ssh" / "id_ed25519")).startswith("DENIED")
    assert tool(profile, "connect", port=listener).startswith("DENIED")
    forks = json.loads(tool(profile, "fork", count=5000))
    assert forks["started"] < 5000 and "Resource temporarily unavailable" in forks["error"], forks
    if os.geteuid() == 0:  # root is exempt from RLIMIT_NPROC: its own pids cgroup bounds it (1024 tasks)
        assert 0 < forks["started"] < 1024, forks
    env = json.loads(tool(profile, "env"))
    assert "LLMC_PROTECTED_PATHS" not in env  # no map of what to go after
    where = json.loads(tool(profile, "whoami"))
    assert where["pid"] < 10  # its own PID namespace
    home = Path(where["home"])
    assert home.is_relative_to(Path(os.environ["LLMC_STATE_DIR"])) and where["cwd"] == str(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    limits = {line[:26].strip(): line[26:].split()[0] for line in where["limits"].splitlines()[1:]}
    assert limits["Max processes"] == "4096" and limits["Max open files"] == "4096"  # RLIMIT_NPROC, _NOFILE
    assert limits["Max data size"] == str(4 << 30)


def test_the_same_server_unsandboxed_reaches_all_of_it(tmp_path: Path, fake_home: Path, listener: int) -> None:
    """What the sandbox takes away: with sandbox = "none" the same tools read the key, the home
    directory and the port (and get no LLMC_PROTECTED_PATHS either)."""
    from llmc_cli.policy.approval import approval_key

    approval_key()
    profile = prober_profile(tmp_path / "p.toml", 'sandbox = "none"\n')
    assert not tool(profile, "read", path=str(llmc_files(tmp_path)["key"])).startswith("DENIED")
    assert tool(profile, "read", path=str(fake_home / ".ssh" / "id_ed25519")) == SSH_KEY
    assert tool(profile, "connect", port=listener) == "CONNECTED"
    assert "LLMC_PROTECTED_PATHS" not in json.loads(tool(profile, "env"))


def test_network_true_reaches_the_port_and_home_persists(tmp_path: Path, listener: int) -> None:
    profile = prober_profile(tmp_path / "p.toml", 'sandbox = "bwrap"\nnetwork = true\n')
    assert tool(profile, "connect", port=listener) == "CONNECTED"
    home = json.loads(tool(profile, "whoami"))["home"]
    assert tool(profile, "append", path=f"{home}/.cache-file", text="kept") == "APPENDED"
    assert tool(profile, "read", path=f"{home}/.cache-file") == "kept"  # the next start sees it
    assert Path(home, ".cache-file").read_text() == "kept"


def test_filesystem_and_memory_servers_under_bwrap(tmp_path: Path, fake_home: Path) -> None:
    """@modelcontextprotocol/server-filesystem writes and reads in its write path; told to serve
    the home directory too, it finds nothing there (the sandbox does not show it). server-memory
    keeps its graph in a file of its write path (MEMORY_FILE_PATH: its package is read-only)."""
    data = tmp_path / "data"
    data.mkdir()
    profile = tmp_path / "p.toml"
    profile.write_text(f"""\
[servers.fs]
command = {json.dumps(node_tool("mcp-server-filesystem"))}
args = {toml_list([str(data), str(fake_home)])}
sandbox = "bwrap"
write_paths = {toml_list([str(data)])}

[servers.mem]
command = {json.dumps(node_tool("mcp-server-memory"))}
env = {{ MEMORY_FILE_PATH = {json.dumps(str(data / "memory.jsonl"))} }}
sandbox = "bwrap"
write_paths = {toml_list([str(data)])}
""")

    def call(name: str, **args: Any) -> Any:
        return llmc("-p", str(profile), "call", "--yes", name, "--json", json.dumps(args))

    written = call("fs.write_file", path=str(data / "a.txt"), content="hello")
    assert written.returncode == 0, written.stderr
    assert (data / "a.txt").read_text() == "hello"
    assert "hello" in call("fs.read_text_file", path=str(data / "a.txt")).stdout
    secret = call("fs.read_text_file", path=str(fake_home / ".ssh" / "id_ed25519"))
    assert SSH_KEY not in secret.stdout and secret.returncode != 0
    created = call("mem.create_entities", entities=[{"name": "llmc", "entityType": "tool", "observations": ["boxed"]}])
    assert created.returncode == 0, created.stderr
    assert "boxed" in (data / "memory.jsonl").read_text()
    assert "boxed" in call("mem.read_graph").stdout


def test_desktop_commander_under_bwrap(tmp_path: Path, fake_home: Path) -> None:
    """Desktop Commander runs shell commands: inside the sandbox they reach its write path, not
    the home directory."""
    data = tmp_path / "data"
    data.mkdir()
    node, entry = desktop_commander()
    profile = tmp_path / "p.toml"
    profile.write_text(
        f"[servers.dc]\ncommand = {json.dumps(node)}\nargs = [{json.dumps(entry)}]\n"
        f'sandbox = "bwrap"\nwrite_paths = {toml_list([str(data)])}\ncwd = {json.dumps(str(data))}\n'
    )
    # The pause after `done`: Desktop Commander answers start_process on Node's `exit` event,
    # which may come before the child's last output was read (seen once in a loaded suite: an
    # empty "Initial output"); a second of quiet lets the output arrive first.
    script = f"echo made > {data}/made.txt; cat {fake_home}/.ssh/id_ed25519; echo done; sleep 1"
    result = llmc(
        "-p", str(profile), "call", "--yes", "dc.start_process", "--json", json.dumps({"command": script, "timeout_ms": 20000})
    )
    assert result.returncode == 0, result.stderr
    text = result.json()["content"][0]["text"]
    assert "done" in text and SSH_KEY not in text, text
    assert (data / "made.txt").read_text() == "made\n"


def test_roots_outside_the_declared_paths_are_not_offered(tmp_path: Path) -> None:
    """A client's roots, as the sandboxed server gets them: a root inside a declared path stays,
    a root that holds one becomes the declared path, any other is left out."""
    from llmc_cli import services
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.mcp.hooks import ClientHooks

    inner, outer = tmp_path / "shared" / "inner", tmp_path / "private"
    inner.mkdir(parents=True)
    outer.mkdir()
    profile = prober_profile(tmp_path / "p.toml", f'sandbox = "bwrap"\nread_paths = {toml_list([str(inner)])}\n')
    roots = [
        {"uri": f"file://{inner}/sub", "name": "sub"},
        {"uri": f"file://{tmp_path / 'shared'}", "name": "shared"},
        {"uri": f"file://{outer}", "name": "private"},
    ]
    with services.open_catalog(load_profile(str(profile)), hooks=ClientHooks(roots=roots)) as catalog:
        result = catalog.session("p").call_tool("roots", {})
    assert json.loads(result["structuredContent"]["result"]) == [f"file://{inner}/sub", f"file://{inner}"]


def test_a_session_keeper_starts_the_server_sandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keeper (another process, given the servers on a pipe) runs the same launch: the
    server it holds has the private home and no network."""
    from tests.helpers import llmc

    monkeypatch.setenv("HOME", str(tmp_path))  # the keeper's socket lives under the state directory
    profile = prober_profile(tmp_path / "p.toml", 'sandbox = "bwrap"\n')
    started = llmc("-p", str(profile), "session", "start", "boxed", "--idle", "2m")
    try:
        assert started.returncode == 0, started.stderr
        called = llmc("-p", str(profile), "call", "--session", "boxed", "p.whoami")
        assert called.returncode == 0, called.stderr
        where = json.loads(called.json()["structuredContent"]["result"])
        assert where["home"].startswith(os.environ["LLMC_STATE_DIR"]) and where["pid"] < 10
    finally:
        llmc("session", "stop", "--all")


def test_a_declared_path_through_a_symbolic_link_still_covers_llmcs_files(tmp_path: Path) -> None:
    """write_paths naming llmc's state directory by a symbolic link: it is bound by its real
    name, so the cover over llmc's files applies."""
    from llmc_cli.policy.approval import approval_key

    approval_key()
    link = tmp_path / "innocent"
    link.symlink_to(os.environ["LLMC_STATE_DIR"])
    profile = prober_profile(tmp_path / "p.toml", f'sandbox = "bwrap"\nwrite_paths = {toml_list([str(link)])}\n')
    got = tool(profile, "read", path=str(link / "approval.key"))
    assert got.startswith("DENIED"), got
    assert tool(profile, "append", path=str(link / "audit.jsonl"), text="forged\n").startswith("DENIED")
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))  # a line that is not JSON would raise here
    assert all("hash" in record for record in trail)  # only llmc's own records  # only llmc's own records


def test_no_capabilities_inside_for_a_server_or_a_workspace_command(tmp_path: Path) -> None:
    """bubblewrap run by root keeps every capability unless told otherwise (CAP_SYS_ADMIN could
    unmount the covers over llmc's files): the one bwrap command line drops them all, for a
    third-party server and for a command the workspace server runs."""
    from llmc_cli.mcp.client import connect
    from llmc_cli.model import ServerSpec
    from llmc_cli.services import builtin_servers

    profile = prober_profile(tmp_path / "p.toml", 'sandbox = "bwrap"\n')
    assert "CapEff:\t0000000000000000" in tool(profile, "read", path="/proc/self/status")
    session = connect(
        ServerSpec(
            name="ws",
            builtin="workspace",
            timeout=60,
            options={"roots": [str(tmp_path)], "read_only": False, "sandbox": "bwrap", "allow_commands": ["cat"]},
        ),
        builtins=builtin_servers(),
    )
    try:
        out = session.call_tool("run_command", {"argv": ["cat", "/proc/self/status"]}, timeout=60)
        assert "CapEff:\t0000000000000000" in out["structuredContent"]["output"], out
    finally:
        session.close()

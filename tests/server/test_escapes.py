"""The escape suite: every way out of the workspace we know of. Each test says whether the
attempt is REFUSED (a tool error, nothing done) or CONTAINED (it runs, but cannot reach out)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from llmc_cli.mcp.server import ToolError
from llmc_cli.server.jail import Jail
from tests.helpers import wait_until
from tests.processes import live_processes
from tests.server.conftest import COMMANDS, SANDBOXES


def test_dotdot_refused(workspace, root: Path, outside: Path) -> None:
    ws = workspace()
    assert "'..' climbs out" in ws.error("read_file", path="../outside/secret.txt")
    assert "'..' climbs out" in ws.error("write_file", path="../outside/new.txt", content="x")
    assert "'..' climbs out" in ws.error("list_directory", path="..")
    assert not (outside / "new.txt").exists()


def test_absolute_path_outside_refused(workspace, outside: Path) -> None:
    ws = workspace()
    for tool, args in [
        ("read_file", {"path": str(outside / "secret.txt")}),
        ("get_file_info", {"path": "/etc/passwd"}),
        ("create_directory", {"path": str(outside / "d")}),
        ("start_search", {"path": str(outside), "pattern": "*"}),
    ]:
        assert "outside the workspace roots" in ws.error(tool, **args), tool
    assert not (outside / "d").exists()


def test_symlink_out_of_root_refused(workspace, root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside)
    ws = workspace()
    assert "symbolic link in this path leads outside" in ws.error("read_file", path="link.txt")
    assert "symbolic link in this path leads outside" in ws.error("write_file", path="link.txt", content="pwned")
    assert "symbolic link in this path leads outside" in ws.error("write_file", path="linkdir/new.txt", content="x")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n" and not (outside / "new.txt").exists()
    # Listed and searched as links, never followed:
    entries = ws.ok("list_directory", depth=3)["entries"]
    assert {e["name"]: e["type"] for e in entries} == {"link.txt": "symlink", "linkdir": "symlink"}
    found = ws.ok("start_search", pattern="TOP SECRET", kind="content", wait_ms=5000)
    assert found["done"] and found["results"] == []


def test_symlink_inside_root_is_followed(workspace, root: Path) -> None:
    (root / "app-1.log").write_text("inside\n")
    (root / "latest.log").symlink_to(root / "app-1.log")
    assert workspace().ok("read_file", path="latest.log")["content"] == "inside\n"


def test_symlink_swapped_after_the_check_refused(root: Path, outside: Path) -> None:
    """REFUSED: the path is checked, then replaced by a symlink out of the root before the open.
    The open (O_NOFOLLOW + the descriptor's real path) catches it. Driven on the Jail itself, so
    the swap lands exactly between the check and the open."""
    jail = Jail([str(root)])
    target = root / "data.txt"
    target.write_text("fine\n")
    real = jail.resolve("data.txt")  # the check passes: a regular file inside the root
    target.unlink()
    target.symlink_to(outside / "secret.txt")  # the swap
    with pytest.raises(ToolError, match="symbolic link"):
        jail.open_read(real, "data.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        jail.write_atomic(real, "data.txt", b"pwned")
    with pytest.raises(ToolError, match="symbolic link"):
        jail.append(real, "data.txt", b"pwned")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_directory_swapped_after_the_check_refused(root: Path, outside: Path) -> None:
    """REFUSED: a directory in the middle of the path is swapped for a symlink out of the root;
    the opened descriptor's real path is outside, so the open is refused."""
    jail = Jail([str(root)])
    (root / "sub").mkdir()
    (root / "sub" / "secret.txt").write_text("inside\n")
    real = jail.resolve("sub/secret.txt")
    (root / "sub" / "secret.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)
    with pytest.raises(ToolError, match="symbolic link"):  # opened through its parent, with O_NOFOLLOW
        jail.open_read(real, "sub/secret.txt")
    with pytest.raises(ToolError, match="symbolic link"):  # the parent directory is opened with O_NOFOLLOW
        jail.write_atomic(real, "sub/secret.txt", b"pwned")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_symlink_swapped_while_the_server_runs(workspace, root: Path, outside: Path) -> None:
    """REFUSED or harmless, never leaked: a thread keeps swapping a file and a symlink out of the
    root while the model reads it through the server; no read may ever return the secret."""
    (root / "flip.txt").write_text("fine\n")
    ws = workspace()
    stop = threading.Event()

    def flip() -> None:
        i = 0
        while not stop.is_set():
            tmp = root / f".flip{i % 2}"
            if i % 2:
                tmp.symlink_to(outside / "secret.txt")
            else:
                tmp.write_text("fine\n")
            os.replace(tmp, root / "flip.txt")
            i += 1

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    outcomes = {"read": 0, "refused": 0}
    try:
        for _ in range(200):
            result = ws.raw("read_file", path="flip.txt")
            assert "TOP SECRET" not in result["content"][0]["text"]
            outcomes["refused" if result.get("isError") else "read"] += 1
    finally:
        stop.set()
        thread.join(timeout=5)
    assert sum(outcomes.values()) == 200


def test_hard_link_refused(workspace, root: Path, outside: Path) -> None:
    """REFUSED: a hard link inside the root to a file outside it looks like an ordinary file;
    a second link is the tell, so reads and writes of multiply-linked files are refused."""
    os.link(outside / "secret.txt", root / "hard.txt")
    ws = workspace()
    assert "2 hard links" in ws.error("read_file", path="hard.txt")
    assert "2 hard links" in ws.error("write_file", path="hard.txt", content="pwned")
    assert "2 hard links" in ws.error("write_file", path="hard.txt", content="pwned", mode="append")
    assert "2 hard links" in ws.error("edit_block", path="hard.txt", old_text="TOP", new_text="NOT")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert ws.ok("start_search", pattern="SECRET", kind="content", wait_ms=5000)["results"] == []


def test_binary_file_read_refused(workspace, root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    ws = workspace()
    assert "binary file" in ws.error("read_file", path="img.png")
    assert "binary file" in ws.error("read_file", path="latin1.txt")


def test_special_files_refused(workspace, root: Path) -> None:
    os.mkfifo(root / "fifo")
    ws = workspace()
    assert "not a regular file" in ws.error("read_file", path="fifo")  # and the server did not hang
    assert "outside the workspace roots" in ws.error("read_file", path="/dev/zero")


# ---------------------------------------------------------------------- commands
@pytest.fixture(params=SANDBOXES)
def runner(request, workspace):
    return workspace(sandbox=request.param, allow_commands=COMMANDS, timeout=10)


@pytest.mark.parametrize("argv", [["ls; id"], ["ls\nid"], ["ls && id"], ["$(id)"], ["`id`"], ["ls|id"]])
def test_shell_metacharacters_in_the_program_refused(runner, argv) -> None:
    """REFUSED: the program name is looked up as one name; no shell ever splits it."""
    assert "is not an allowed command" in runner.error("run_command", argv=argv)


def test_shell_metacharacters_in_arguments_contained(runner, root: Path) -> None:
    """CONTAINED: arguments go to the program verbatim (argv, no shell): `;`, newlines and `$(...)`
    are just bytes that echo prints, and the file the injection names survives."""
    (root / "keep.txt").write_text("x")
    out = runner.ok("run_command", argv=["echo", "a; rm keep.txt", "b\nrm keep.txt", "$(rm keep.txt)"])
    assert out["output"] == "a; rm keep.txt b\nrm keep.txt $(rm keep.txt)\n" and out["exitCode"] == 0
    assert (root / "keep.txt").exists()


def test_shell_strings_refused_unless_allowed(workspace) -> None:
    """REFUSED: a command line string needs allow_shell; without it there is no `command` argument."""
    ws = workspace(sandbox="none", allow_commands=["echo"])
    assert "command" not in ws.tools["run_command"]["inputSchema"]["properties"]
    assert "unknown argument 'command'" in ws.error("run_command", command="echo hi; id")
    shell = workspace(sandbox="none", allow_commands=[], allow_shell=True)
    assert shell.ok("run_command", command="echo $((1+2))")["output"] == "3\n"


def test_program_not_on_the_allow_list_refused(runner, root: Path) -> None:
    """REFUSED: however it is reached: by name, absolute path, a relative path into the root, a
    copy of an allowed program's name planted in the root, or `..` to a system binary."""
    fake = root / "ls"
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    (root / "bin").mkdir()
    for argv in (["id"], ["/usr/bin/id"], ["./ls"], [str(fake)], ["bin/../ls"], ["../../../../../../usr/bin/id"], ["python3"]):
        assert "is not an allowed command" in runner.error("run_command", argv=argv), argv


def test_path_trick_contained(runner, root: Path) -> None:
    """CONTAINED: a program planted in the root under an allowed name is not what runs; names are
    looked up on a fixed PATH, and the environment's PATH is ours, not the model's."""
    (root / "echo").write_text("#!/bin/sh\necho pwned\n")
    (root / "echo").chmod(0o755)
    out = runner.ok("run_command", argv=["echo", "real"])
    assert out["output"] == "real\n"
    env = runner.ok("run_command", argv=["sh", "-c", "echo $PATH; env | wc -l"])["output"].split()
    assert env[0] == "/usr/local/bin:/usr/bin:/bin" and int(env[1]) <= 10  # scrubbed environment


def test_fork_that_outlives_its_parent_contained(runner, root: Path) -> None:
    """CONTAINED: the parent exits at once, leaving a child in its group and a setsid'd grandchild
    that left the group; terminating the process (or its time limit) kills both. With bwrap the
    PID namespace takes them down; without, killpg plus the environment tag does."""
    # Durations no other program on the machine sleeps for: the check scans every process.
    durations = [f"{n}.{os.getpid()}" for n in (300, 301)]
    script = f"sleep {durations[0]} & setsid sleep {durations[1]} & echo started"
    out = runner.ok("start_process", argv=["sh", "-c", script], wait_ms=2000, quiet_ms=200)
    assert "started" in out["output"]
    runner.ok("terminate_process", handle=out["handle"])
    assert wait_until(lambda: not _sleepers(durations), 5), _sleepers(durations)


def _sleepers(durations: list[str]) -> list[int]:
    return [
        p.pid
        for p in live_processes()
        if (cmd := p.cmdline())[:1] == [b"sleep"] and cmd[1:2] and cmd[1].decode(errors="replace") in durations
    ]


def test_process_that_prints_forever_contained(runner) -> None:
    """CONTAINED: `yes` is ended at the output cap; memory and the tool result stay bounded."""
    out = runner.ok("run_command", argv=["yes"], timeout_s=10)
    assert out["endedBy"] == "output limit of 1000000 bytes" and out["truncated"] is True
    assert out["outputBytes"] == 1_000_000 and len(out["output"]) <= 256_000


def test_process_time_limit_contained(runner) -> None:
    """CONTAINED: a process that never ends is ended at its time limit."""
    out = runner.ok("run_command", argv=["sleep", "60"], timeout_s=0.5)
    assert out["timedOut"] is True and out["running"] is False


def test_concurrent_process_limit_refused(workspace) -> None:
    ws = workspace(sandbox="none", allow_commands=["sleep"], max_processes=2)
    handles = [ws.ok("start_process", argv=["sleep", "30"], wait_ms=0)["handle"] for _ in range(2)]
    assert "the limit is 2" in ws.error("start_process", argv=["sleep", "30"], wait_ms=0)
    ws.ok("terminate_process", handle=handles[0])
    ws.ok("start_process", argv=["sleep", "1"], wait_ms=0)


@pytest.mark.skipif("bwrap" not in SANDBOXES, reason="bubblewrap is not installed here")
def test_bwrap_sandbox_contains_writes_and_network(workspace, root: Path, outside: Path) -> None:
    """CONTAINED (bwrap): outside the roots the system is read-only, /tmp is private (the
    `outside` folder, under the host's /tmp, does not even exist in there), and there is no
    network (the namespace has only `lo`)."""
    ws = workspace(sandbox="bwrap", allow_commands=COMMANDS, timeout=10)
    probe = Path("/etc/llmc-escape-probe")
    out = ws.ok(
        "run_command",
        argv=[
            "sh",
            "-c",
            f"echo x > {probe}; echo rc=$?; echo x > {outside}/new.txt; "
            "echo rc=$?; grep -c ':' /proc/net/dev; echo inside > made.txt",
        ],
    )
    assert "Read-only file system" in out["output"] and "Directory nonexistent" in out["output"]
    assert out["output"].splitlines()[-3:] == ["rc=2", "rc=2", "1"][-3:] or out["output"].count("rc=2") == 2
    assert out["output"].splitlines()[-1] == "1"  # one interface: lo
    assert not probe.exists() and not (outside / "new.txt").exists()
    assert (root / "made.txt").read_text() == "inside\n"  # the root itself is writable


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_llmc_config_and_state_off_limits_even_inside_a_root(workspace, tmp_path: Path, sandbox: str) -> None:
    """REFUSED: with a root that contains llmc's own config and state directories (profiles,
    tokens, audit log), the model can neither read nor rewrite them: editing its profile would
    loosen its own policy. CONTAINED with bwrap: processes see them empty."""
    config, state = tmp_path / "config", tmp_path / "state"  # LLMC_CONFIG_DIR / LLMC_STATE_DIR (conftest)
    (config / "profiles").mkdir(parents=True)
    (config / "profiles" / "default.toml").write_text('[policy]\ndefault = "deny"\n')
    state.mkdir(exist_ok=True)
    (state / "tokens.json").write_text('{"token": "SECRET-TOKEN"}')
    ws = workspace(roots=[str(tmp_path)], sandbox=sandbox, allow_commands=COMMANDS)
    assert "off limits" in ws.error("write_file", path="config/profiles/default.toml", content="[policy]\n")
    assert "off limits" in ws.error("read_file", path="state/tokens.json")
    assert "off limits" in ws.error("list_directory", path="config")
    assert ws.ok("start_search", pattern="SECRET-TOKEN", kind="content", wait_ms=5000)["results"] == []
    assert ws.ok("start_search", pattern="default.toml", wait_ms=5000)["results"] == []
    assert (config / "profiles" / "default.toml").read_text() == '[policy]\ndefault = "deny"\n'
    if sandbox == "bwrap":
        out = ws.ok("run_command", argv=["sh", "-c", f"cat {state}/tokens.json; ls -A {config} | wc -l"])["output"]
        assert "SECRET-TOKEN" not in out and out.strip().endswith("0")

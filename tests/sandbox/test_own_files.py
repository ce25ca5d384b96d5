"""Issue 35, High: llmc writes its own files through paths a sandboxed server controls.

Every file llmc writes is out of a server's reach inside a declared path, or the configuration
is refused (exit 3, one line naming the server and the path); and no file llmc writes is
opened through a link it did not make (config/files.open_own): a link, a hard link or a FIFO
in the place of the audit log, its lock or its anchor, or a keeper's log, stops the write and
leaves the file it points to as it was. The hostile server (tests/peers/sandbox_prober.py)
plants the links itself where bubblewrap is installed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import PEERS, Result, llmc, sdk_server
from tests.sandbox.conftest import BWRAP

VICTIM = "# the user's shell start-up file\n"


def profile(path: Path, server: str, top: str = "") -> Path:
    """A profile at `path`: `top` (audit_log, lock) then server p (the prober), with `server` lines."""
    path.write_text(
        f"{top}\n[servers.p]\ncommand = {json.dumps(sdk_server('sandbox_prober.py')[0])}\n"
        f"args = [{json.dumps(str(PEERS / 'sandbox_prober.py'))}]\n{server}",
        encoding="utf-8",
    )
    return path


def call(p: Path, tool: str = "env", env: dict[str, str | None] | None = None, **args: str) -> Result:
    return llmc("-p", str(p), "call", "--yes", f"p.{tool}", "--json", json.dumps(args), env=env)


def box(key: str, path: Path | str) -> str:
    return f'sandbox = "bwrap"\n{key} = [{json.dumps(str(path))}]\n'


def refused(result: Result, *words: str) -> None:
    code, err = result.returncode, result.stderr
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_llmc_files_in_a_servers_declared_path_are_refused_at_load(tmp_path: Path) -> None:
    """What a sandbox cannot cover for the whole life of the file is refused, naming server and
    path: a loose audit log or tool lock inside a write path (a rotation, a .lock, an anchor not
    yet made could be a link the server made first), the audit log inside a read path, a
    declared path inside llmc's own directories, a link on the way to llmc's state inside a
    write path. Without bubblewrap too: the refusal comes first."""
    work = tmp_path / "work"
    work.mkdir()
    state = Path(os.environ["LLMC_STATE_DIR"])
    (state / "results").mkdir(parents=True)
    config = Path(os.environ["LLMC_CONFIG_DIR"])
    (config / "profiles").mkdir(parents=True, exist_ok=True)
    cases = [
        (f"audit_log = {json.dumps(str(work / 'logs' / 'audit.jsonl'))}", box("write_paths", work), "audit log"),
        (f"audit_log = {json.dumps(str(work / 'audit.jsonl'))}", box("read_paths", work), "audit log"),
        (f"lock = {json.dumps(str(work / 'llmc.lock'))}", box("write_paths", work), "tool lock"),
        ("", box("write_paths", state / "results"), "state directory"),
        ("", box("read_paths", config / "profiles"), "config directory"),  # (the directory itself is covered whole)
    ]
    for top, table, what in cases:
        p = profile(tmp_path / "p.toml", table, top)
        refused(call(p), "server p", what)
    # llmc's state reached through a symbolic link the server could re-point
    (work / "state").symlink_to(state)
    p = profile(tmp_path / "p.toml", box("write_paths", work))
    refused(call(p, env={"LLMC_STATE_DIR": str(work / "state")}), "server p", str(work / "state"), "symbolic link")


@pytest.mark.parametrize("planted", ["audit.jsonl", "audit.jsonl.lock", "audit.jsonl.anchor"])
@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_no_file_llmc_writes_follows_a_link_in_its_place(tmp_path: Path, planted: str, kind: str) -> None:
    """Links planted at the names of the audit trail (as a server with the directory would):
    the call stops before it runs (exit 3, the audit cannot be written), the file they point to
    is untouched."""
    logs = tmp_path / "logs"
    logs.mkdir()
    victim = tmp_path / "bashrc"
    victim.write_text(VICTIM)
    p = profile(tmp_path / "p.toml", 'sandbox = "none"\n', f"audit_log = {json.dumps(str(logs / 'audit.jsonl'))}")
    if planted != "audit.jsonl":  # the trail exists already: its anchor and lock are what is planted
        ok = call(p, "env")
        assert ok.returncode == 0, ok.stderr
        (logs / planted).unlink(missing_ok=True)
    if kind == "symlink":
        (logs / planted).symlink_to(victim)
    else:
        os.link(victim, logs / planted)
    result = call(p, "env")
    refused(result, "audit")
    assert victim.read_text() == VICTIM


def test_a_fifo_in_the_place_of_the_audit_log_does_not_hang_llmc(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "audit.jsonl")
    p = profile(tmp_path / "p.toml", 'sandbox = "none"\n', f"audit_log = {json.dumps(str(logs / 'audit.jsonl'))}")
    refused(call(p, "env"), "audit")


@pytest.mark.e2e
@pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (scripts/test.sh installs it)")
def test_a_sandboxed_server_plants_links_where_llmc_writes_and_llmc_never_follows_them(tmp_path: Path) -> None:
    """The prober may write all of the test's directory (llmc's config and state directories and
    the profile are in it, covered): it cannot make a link inside llmc's directories; the links
    it makes in its own directory are never followed by llmc, even by a profile that later names
    that directory for its audit log; and a profile whose server could reach that audit log is
    refused."""
    work = tmp_path / "work"
    work.mkdir()
    victim = tmp_path / "bashrc"
    victim.write_text(VICTIM)
    state = Path(os.environ["LLMC_STATE_DIR"])
    boxed = profile(tmp_path / "p.toml", box("write_paths", tmp_path))

    def tool(name: str, **args: str) -> str:
        result = call(boxed, name, **args)
        assert result.returncode == 0, result.stderr
        return str(result.json()["structuredContent"]["result"])

    for name in ("audit.jsonl.lock", "audit.jsonl.2", "locks/x.lock", "results/x.json", "sessions/s.log", "approval.key.tmp"):
        assert tool("link", target=str(victim), path=str(state / name)).startswith("DENIED"), name
    for name in ("audit.jsonl", "audit.jsonl.lock", "audit.jsonl.anchor"):
        assert tool("link", target=str(victim), path=str(work / name)) == "LINKED"
    elsewhere = profile(tmp_path / "q.toml", 'sandbox = "none"\n', f"audit_log = {json.dumps(str(work / 'audit.jsonl'))}")
    refused(call(elsewhere, "env"), "audit")
    within = profile(tmp_path / "r.toml", box("write_paths", work), f"audit_log = {json.dumps(str(work / 'audit.jsonl'))}")
    refused(call(within, "env"), "server p", "audit log")
    assert victim.read_text() == VICTIM

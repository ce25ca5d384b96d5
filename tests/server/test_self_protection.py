"""The model must never loosen its own sandbox: llmc's own files (config and state directories, the
profile file, its audit log and lock) stay untouched whatever the file tools are asked, by name,
by another name (hard link, symbolic link, a renamed ancestor), or before they exist.

Each ESCAPE is one line: steps run in order through the real server; every step but the one
marked REFUSED must succeed, the REFUSED one must fail with the off-limits message, and the
protected files must be byte for byte as before. Steps `!mv`, `!ln`, `!symlink` happen behind the
server's back (what a process without a sandbox, or another program, could do)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.mcp.server import ToolError
from llmc_cli.server.jail import Jail
from tests.helpers import llmc, llmc_executable
from tests.server.conftest import BWRAP

REFUSED = "refused"
OK = "ok"
PROFILE = '[policy]\ndefault = "deny"\n'

# The layout inside the root (R): a config dir, a state dir, a profile given by path, its audit
# log and lock, and a config dir that does not exist yet (R/fresh/llmc).
CONFIG, STATE, MISSING = ".config/llmc", ".local/state/llmc", "fresh/llmc"
FILES = {
    f"{CONFIG}/profiles/default.toml": PROFILE,
    f"{STATE}/audit.jsonl": '{"n":1}\n',
    "team.toml": PROFILE,
    "logs/audit.jsonl": '{"n":2}\n',
    "logs/audit.jsonl.lock": "",
    "llmc.lock": "{}\n",
}
PROTECT = [CONFIG + "/", STATE + "/", MISSING + "/", "team.toml", "logs/audit.jsonl", "llmc.lock"]  # "/": a dir

W = lambda path, text="pwned": ("write_file", {"path": path, "content": text})  # noqa: E731
A = lambda path: ("write_file", {"path": path, "content": "pwned", "mode": "append"})  # noqa: E731
E = lambda path: ("edit_block", {"path": path, "old_text": "deny", "new_text": "allow"})  # noqa: E731
M = lambda src, dst: ("move_file", {"source": src, "destination": dst})  # noqa: E731
D = lambda path: ("create_directory", {"path": path})  # noqa: E731
R = lambda path: ("read_file", {"path": path})  # noqa: E731
L = lambda path: ("list_directory", {"path": path})  # noqa: E731

ESCAPES: list[tuple[str, list[tuple[str, tuple[str, dict[str, Any]]]]]] = [
    ("write the profile", [(REFUSED, W(f"{CONFIG}/profiles/default.toml"))]),
    ("edit the profile", [(REFUSED, E(f"{CONFIG}/profiles/default.toml"))]),
    ("append to the profile", [(REFUSED, A(f"{CONFIG}/profiles/default.toml"))]),
    ("add a profile", [(REFUSED, W(f"{CONFIG}/profiles/new.toml"))]),
    ("profile through '..'", [(REFUSED, W(f"logs/../{CONFIG}/profiles/default.toml"))]),
    ("move the config ancestor away", [(REFUSED, M(".config", "x"))]),
    ("move the config dir away", [(REFUSED, M(CONFIG, "y"))]),
    ("move the state ancestor away", [(REFUSED, M(".local", "z"))]),
    ("move a file into the config dir", [(OK, W("evil.toml", PROFILE)), (REFUSED, M("evil.toml", f"{CONFIG}/p.toml"))]),
    ("read the live audit log", [(REFUSED, R(f"{STATE}/audit.jsonl"))]),
    ("list the config dir", [(REFUSED, L(CONFIG))]),
    ("write the profile given by path", [(REFUSED, W("team.toml"))]),
    ("edit the profile given by path", [(REFUSED, E("team.toml"))]),
    ("move the profile given by path", [(REFUSED, M("team.toml", "other.toml"))]),
    ("replace the profile given by path", [(OK, W("other.toml", PROFILE)), (REFUSED, M("other.toml", "team.toml"))]),
    ("the profile's lock beside it", [(REFUSED, W("team.toml.lock"))]),
    ("append to the audit log", [(REFUSED, A("logs/audit.jsonl"))]),
    ("read the audit log", [(REFUSED, R("logs/audit.jsonl"))]),
    ("forge a rotated audit file", [(REFUSED, W("logs/audit.jsonl.1"))]),
    ("forge the audit anchor", [(REFUSED, W("logs/audit.jsonl.anchor"))]),
    ("take the audit log's lock", [(REFUSED, W("logs/audit.jsonl.lock"))]),
    ("move the audit log's folder", [(REFUSED, M("logs", "logs2"))]),
    ("rewrite the manifest lock", [(REFUSED, W("llmc.lock"))]),
    ("create the config that does not exist yet", [(REFUSED, W(f"{MISSING}/profiles/default.toml"))]),
    ("create its directory", [(REFUSED, D(f"{MISSING}/profiles"))]),
    (
        "build it elsewhere, move it in",
        [(OK, D("x/llmc/profiles")), (OK, W("x/llmc/profiles/default.toml")), (REFUSED, M("x/llmc", MISSING))],
    ),
    (
        "build its parent, move that in",
        [(OK, D("x/llmc/profiles")), (OK, W("x/llmc/profiles/default.toml")), (REFUSED, M("x", "fresh"))],
    ),
    ("make its parent, move it in", [(OK, D("x/llmc")), (OK, D("fresh")), (REFUSED, M("x/llmc", MISSING))]),
    ("a file where its parent goes", [(REFUSED, W("fresh"))]),
    (
        "hard link to the profile",
        [
            (OK, ("!ln", {"source": "team.toml", "destination": "hard.toml"})),
            (REFUSED, W("hard.toml")),
            (REFUSED, R("hard.toml")),
        ],
    ),
    (
        "symbolic link to the config",
        [(OK, ("!symlink", {"source": ".config", "destination": "cfg"})), (REFUSED, W("cfg/llmc/profiles/default.toml"))],
    ),
    ("symlinked ancestor moved", [(OK, ("!symlink", {"source": ".config", "destination": "cfg"})), (REFUSED, M("cfg", "x"))]),
    (
        "config renamed behind the server's back",
        [
            (OK, ("!mv", {"source": ".config", "destination": "moved"})),
            (REFUSED, W("moved/llmc/profiles/default.toml")),
            (REFUSED, E("moved/llmc/profiles/default.toml")),
            (REFUSED, R("moved/llmc/profiles/default.toml")),
        ],
    ),
    (
        "audit log renamed behind the server's back",
        [(OK, ("!mv", {"source": "logs", "destination": "l2"})), (REFUSED, A("l2/audit.jsonl"))],
    ),
]


def _layout(root: Path) -> dict[str, bytes]:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return _snapshot(root)


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every protected file's bytes, found by its identity wherever it is now."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and any(part in str(p.relative_to(root)) for part in ("llmc", "audit", "team.toml"))
    }


def _behind_the_back(root: Path, op: str, args: dict[str, str]) -> None:
    src, dst = root / args["source"], root / args["destination"]
    {"!mv": os.rename, "!ln": os.link, "!symlink": lambda s, d: d.symlink_to(s)}[op](src, dst)


@pytest.mark.parametrize("steps", [s for _, s in ESCAPES], ids=[name for name, _ in ESCAPES])
def test_escape_refused(workspace, root: Path, steps) -> None:
    before = _layout(root)
    ws = workspace(protect=[f"{root}/{p}" for p in PROTECT])
    for expect, (tool, args) in steps:
        if tool.startswith("!"):
            _behind_the_back(root, tool, args)
            continue
        if expect == OK:
            ws.ok(tool, **args)
        else:
            message = ws.error(tool, **args)
            assert "llmc's own configuration" in message, (tool, args, message)
    renamed = {k.replace("moved/", ".config/").replace("l2/", "logs/"): v for k, v in _snapshot(root).items()}
    assert {k: v for k, v in renamed.items() if k in before} == before
    assert not (root / MISSING).exists()


def test_protected_files_hidden_from_searches(workspace, root: Path) -> None:
    _layout(root)
    ws = workspace(protect=[f"{root}/{p}" for p in PROTECT])
    found = ws.ok("start_search", pattern="deny", kind="content", wait_ms=5000)
    assert found["done"] and found["results"] == []  # the profiles say "deny"; none is searchable


def test_ordinary_work_next_to_protected_files(workspace, root: Path) -> None:
    """Protection costs nothing elsewhere: siblings, look-alike names and other moves still work."""
    _layout(root)
    ws = workspace(protect=[f"{root}/{p}" for p in PROTECT])
    ws.ok("create_directory", path=".config/other-tool")
    ws.ok("write_file", path=".config/other-tool/settings.json", content="{}")
    ws.ok("move_file", source=".config/other-tool", destination=".config/other")
    ws.ok("write_file", path="logs/app.log", content="x")
    ws.ok("write_file", path="team-notes.toml", content="x")
    ws.ok("create_directory", path="fresh-start/sub")
    assert ws.ok("read_file", path=".config/other/settings.json")["content"] == "{}"


def test_the_jail_judges_by_identity_not_by_name(root: Path) -> None:
    """Directly on the Jail: a protected directory renamed after the server started is still
    recognised by its device and inode, by every writing path."""
    (root / "cfg" / "llmc").mkdir(parents=True)
    (root / "cfg" / "llmc" / "p.toml").write_text(PROFILE)
    jail = Jail([str(root)], protect=[str(root / "cfg" / "llmc")])
    os.rename(root / "cfg", root / "renamed")
    real = jail.resolve("renamed/llmc/p.toml")  # the name is no longer protected ...
    for attempt in (
        lambda: jail.write_atomic(real, "p", b"x"),
        lambda: jail.append(real, "p", b"x"),
        lambda: jail.open_read(real, "p"),
    ):
        with pytest.raises(ToolError, match="off limits"):  # ... the identity still is
            attempt()
    assert (root / "renamed" / "llmc" / "p.toml").read_text() == PROFILE


# ---------------------------------------------------------------------- through the real CLI
def _profile(path: Path, server: str, root: Path, extra: str = "") -> None:
    if server == "builtin":
        table = f'builtin = "workspace"\noptions = {{ roots = ["{root}"], read_only = false }}\n'
    else:  # `llmc serve workspace` as a stdio child: its environment is allow-listed
        table = f'command = "{llmc_executable()}"\nargs = ["serve", "workspace", "--root", "{root}"]\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{extra}[servers.ws]\n{table}")


CLI_ESCAPES = [  # (profile location, tool, arguments as key=value)
    ("config", "write_file", ["path=config/profiles/default.toml", "content=[policy]"]),
    ("config", "read_file", ["path=state/audit.jsonl"]),
    ("config", "move_file", ["source=config", "destination=x"]),
    ("path", "write_file", ["path=team.toml", "content=[policy]"]),
    ("path", "write_file", ["path=logs/audit.jsonl", "content={}", "mode=append"]),
    ("path", "read_file", ["path=logs/audit.jsonl"]),
    ("path", "write_file", ["path=team.lock", "content={}"]),
]


@pytest.mark.parametrize("server", ["builtin", "stdio"])
@pytest.mark.parametrize("where, tool, args", CLI_ESCAPES, ids=[f"{w}-{t}-{a[0]}" for w, t, a in CLI_ESCAPES])
def test_escape_refused_through_the_cli(tmp_path: Path, server: str, where: str, tool: str, args: list[str]) -> None:
    """The workspace is the test's whole tmp dir: LLMC_CONFIG_DIR (tmp/config) and LLMC_STATE_DIR
    (tmp/state) lie inside it (tests/conftest.py). A stdio child does not inherit those variables:
    llmc must tell it where its files are."""
    if where == "config":
        profile = tmp_path / "config" / "profiles" / "default.toml"
        _profile(profile, server, tmp_path)
        target: list[str] = []
    else:  # given by path, with its audit log and lock elsewhere in the workspace
        profile = tmp_path / "team.toml"
        _profile(profile, server, tmp_path, f'audit_log = "{tmp_path}/logs/audit.jsonl"\nlock = "team.lock"\n')
        _lock(tmp_path, profile)
        target = ["-p", str(profile)]
    before = profile.read_bytes()
    ok = llmc(*target, "call", "ws.list_directory")  # the first call creates the audit log
    assert ok.returncode == 0, ok.stderr
    audit = tmp_path / ("logs" if where == "path" else "state") / "audit.jsonl"
    logged = audit.read_bytes()
    proc = llmc(*target, "call", "--yes", f"ws.{tool}", *args)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "llmc's own configuration" in proc.stdout + proc.stderr
    assert profile.read_bytes() == before
    assert audit.read_bytes().startswith(logged) and b"pwned" not in audit.read_bytes()


def _lock(tmp_path: Path, profile: Path) -> None:
    proc = llmc("-p", str(profile), "tools", "lock", "-o", str(tmp_path / "team.lock"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed here")
def test_processes_in_bwrap_cannot_reach_protected_files(workspace, root: Path) -> None:
    """CONTAINED (bwrap): protected directories are empty inside the sandbox, protected files
    read as empty and cannot be written, hard-linked or have an ancestor renamed."""
    before = _layout(root)
    ws = workspace(protect=[f"{root}/{p}" for p in PROTECT], sandbox="bwrap", allow_commands=["sh"], timeout=20)
    script = (
        f"cat {CONFIG}/profiles/default.toml logs/audit.jsonl team.toml; "
        f"echo x >> team.toml; echo x >> logs/audit.jsonl; ln team.toml hard.toml; mv .config moved; "
        f"mv logs l2; mkdir -p {MISSING}/profiles && echo p > {MISSING}/profiles/default.toml; echo done"
    )
    out = ws.ok("run_command", argv=["sh", "-c", script])["output"]
    assert out.rstrip().endswith("done") and "deny" not in out and '"n"' not in out, out
    assert _snapshot(root) == before or {k: v for k, v in _snapshot(root).items() if k in before} == before
    assert not (root / "hard.toml").exists() and (root / ".config").is_dir() and (root / "logs").is_dir()
    assert not (root / MISSING / "profiles" / "default.toml").exists()
    shutil.rmtree(root / "fresh", ignore_errors=True)


@pytest.mark.parametrize("server", ["builtin", "stdio"])
def test_escape_refused_through_a_session(tmp_path: Path, server: str) -> None:
    """A session keeper holds the server: llmc still tells it where its files are."""
    profile = tmp_path / "config" / "profiles" / "default.toml"
    _profile(profile, server, tmp_path)
    before = profile.read_bytes()
    started = llmc("session", "start", "held")
    assert started.returncode == 0, started.stderr
    try:
        for args in (
            ["ws.write_file", "path=config/profiles/default.toml", "content=[policy]"],
            ["ws.read_file", "path=state/audit.jsonl"],
            ["ws.move_file", "source=config", "destination=x"],
        ):
            proc = llmc("call", "--session", "held", "--yes", *args)
            assert proc.returncode == 1 and "llmc's own configuration" in proc.stdout + proc.stderr, (args, proc)
    finally:
        llmc("session", "stop", "held")
    assert profile.read_bytes() == before

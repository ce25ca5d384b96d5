"""Issue 35, Low: a secret inside a tool's NAME is masked in the audit's `tool` field (and, on
export, in span names: tests/telemetry/test_otel.py); `read_paths`/`write_paths` under /proc,
/sys, /dev (or /run, or a link to them) are refused at load; and the masker has no false
positives: the working directory (PWD, OLDPWD), paths, user names and common words are not
secrets, so records keep their paths and a confirmation's refusal keeps its runnable `policy
approve` command. Through the real CLI, with `mcp` SDK servers (tests/peers)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, audit_trail, llmc

SECRET = "s3cr3t-value-for-the-test"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def server(peer: str, extra: str = "") -> str:
    return f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / peer))}]\n{extra}"


def test_a_secret_inside_a_tools_name_is_masked_in_the_audit(tmp_path: Path) -> None:
    profile = write(
        tmp_path / "p.toml", "[servers.s]\n" + server("secret_named.py", 'env = { SERVICE_API_KEY = "${SERVICE_API_KEY}" }\n')
    )
    proc = llmc("-p", str(profile), "call", f"s.lookup_{SECRET}", "query=x", env={"SERVICE_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))
    assert trail and all(SECRET not in json.dumps(r) for r in trail), trail
    assert {r.get("tool") for r in trail} == {"lookup_***"}


@pytest.mark.parametrize("declared", ["/proc", "/proc/1", "/sys/kernel", "/dev", "/dev/shm", "/run", "LINK"])
def test_kernel_trees_are_refused_as_declared_paths(tmp_path: Path, declared: str) -> None:
    if declared == "LINK":
        (tmp_path / "proc-link").symlink_to("/proc")
        declared = str(tmp_path / "proc-link")
    profile = write(
        tmp_path / "p.toml", "[servers.p]\n" + server("sandbox_prober.py", f'sandbox = "bwrap"\nread_paths = ["{declared}"]\n')
    )
    proc = llmc("-p", str(profile), "call", "p.env")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "which would show the server other processes" in lines[0] and "Traceback" not in proc.stderr


def test_the_working_directory_and_paths_are_not_masked(tmp_path: Path) -> None:
    """PWD reads like a secret variable ("pwd"); its value is the working directory, in every
    path argument: not masked in the record, and the refusal of a call that needs confirmation
    (no terminal) names a `policy approve` command that runs as printed."""
    work = tmp_path / "work"
    work.mkdir()
    target = work / "notes.txt"
    profile = write(
        tmp_path / "p.toml",
        "[servers.p]\n" + server("sandbox_prober.py", 'sandbox = "none"\n') + '\n[policy]\nconfirm = ["p.append"]\n',
    )
    env = {"PWD": str(work), "OLDPWD": str(tmp_path), "DB_PASSWORD": "/etc/app/db-password-file"}
    refused = llmc("-p", str(profile), "call", "p.append", f"path={target}", "text=hi", env=env, cwd=work)
    assert refused.returncode == 4, refused.stderr
    assert "***" not in refused.stderr and "policy approve p.append --json" in refused.stderr, refused.stderr
    command = refused.stderr.split("llmc -p ", 1)[1].split(" --write", 1)[0]
    approved = llmc("-p", *shlex.split(command), "--write", env=env, cwd=work)  # as printed
    assert approved.returncode == 0, approved.stderr
    done = llmc("-p", str(profile), "call", "p.append", f"path={target}", "text=hi", env=env, cwd=work)
    assert done.returncode == 0 and target.read_text() == "hi", done.stderr
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))
    assert any(r.get("arguments", {}).get("path") == str(target) for r in trail), trail
    assert not any("***" in json.dumps(r.get("arguments", {})) for r in trail), trail


def test_the_masker_keeps_common_words_paths_and_names() -> None:
    import getpass

    from llmc_cli.config.secrets import Masker

    masker = Masker({"production", "/home/someone/.config", getpass.getuser(), "a-real-secret-123"})
    text = f"deploy to production from /home/someone/.config as {getpass.getuser()} with a-real-secret-123"
    assert masker.text(text) == f"deploy to production from /home/someone/.config as {getpass.getuser()} with ***"
    assert masker({"password": "production"}) == {"password": "***"}  # by name, still

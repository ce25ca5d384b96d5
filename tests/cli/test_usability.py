"""Usability through the installed CLI: "did you mean", argument validation before a call, global
options after the subcommand, a reader that goes away, `tools export -o -`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import llmc, llmc_executable

# (argv, stderr must contain): every one is bad input, exit 2, one line, no call made
BAD_INPUT = [
    (["tool"], "did you mean 'tools'?"),
    (["call", "workspace.reed_file", "path=x"], "did you mean 'read_file'?"),
    (["call", "workspace.read_file", "pth=x"], "unknown argument 'pth' (did you mean 'path'?)"),
    (["call", "workspace.read_file"], "missing required argument 'path'"),
    (["call", "workspace.read_file", "path:=3"], "argument path: expected string, got 3"),
    (["call", "workspace.read_file", "path:=null"], "argument path: expected string, got null"),  # required
]


@pytest.mark.parametrize("argv,expected", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_says_what_was_meant(argv, expected):
    proc = llmc(*argv)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and proc.stdout == ""


def test_no_validate_passes_anything_through():
    proc = llmc("call", "--no-validate", "workspace.read_file", "pth=x")
    assert proc.returncode == 1 and json.loads(proc.stdout)["isError"] is True  # the server judged it


def test_null_for_an_optional_argument_is_left_to_the_server(tmp_path):
    """Strict-mode models (and the spec's x-mcp-header rules) use null for 'not provided'."""
    (tmp_path / "notes.txt").write_text("alpha\n")
    proc = llmc("call", "workspace.read_file", f"path={tmp_path / 'notes.txt'}", "offset:=null")
    assert "argument offset" not in proc.stderr
    assert proc.returncode in (0, 1) and "content" in json.loads(proc.stdout), proc.stderr  # the server judged it


def test_unknown_profile_suggests_the_close_one(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "ops.toml").write_text("")
    proc = llmc("tools", "list", "-p", "osp", env={"LLMC_CONFIG_DIR": str(tmp_path)})
    assert proc.returncode == 3 and "did you mean 'ops'?" in proc.stderr


def test_global_options_after_the_subcommand(tmp_path):
    before = llmc("-p", "nope", "tools", "list", env={"LLMC_CONFIG_DIR": str(tmp_path)})
    after = llmc("tools", "list", "-p", "nope", "-v", env={"LLMC_CONFIG_DIR": str(tmp_path)})
    assert before.returncode == after.returncode == 3 and before.stderr == after.stderr


@pytest.mark.parametrize("argv", [["tools", "list"], ["tools", "list", "--format", "table"], ["audit", "tail"], ["--help"]])
def test_a_reader_that_went_away_is_no_failure(argv):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        proc = subprocess.run(
            [llmc_executable(), *argv], stdout=write, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, timeout=120
        )
    finally:
        os.close(write)
    assert proc.returncode == 0 and proc.stderr == ""


def test_export_to_stdout():
    proc = llmc("tools", "export", "--format", "openai", "-o", "-")
    assert proc.returncode == 0 and {t["function"]["name"] for t in json.loads(proc.stdout)} >= {"read_file"}

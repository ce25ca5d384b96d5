"""Issue 39, "The cache does what `policy check` says": a server that announces
notifications/tools/list_changed while it starts (server-everything does) keeps its cached
results (the definition hash in the key already tells a changed tool apart); one announced after
the server was listed drops them, and -v says so."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.cache.test_results import write_profile
from tests.helpers import llmc, node_tool, profile_file
from tests.profiles.runner import toml_str


@pytest.mark.e2e  # the npm reference server-everything
def test_a_list_changed_at_start_keeps_the_cache(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f'[servers.everything]\ncommand = {toml_str(node_tool("mcp-server-everything"))}\nsandbox = "none"\n'
        '[cache]\ntools = ["everything.get-sum"]\n',
    )
    first = llmc("-v", "call", "everything.get-sum", "a=1", "b=2")
    assert first.returncode == 0 and "cached" not in first.json(), first.stderr
    again = llmc("-v", "call", "everything.get-sum", "a=1", "b=2")
    assert again.returncode == 0, again.stderr
    assert again.json().get("cached") is True, again.stderr
    assert "dropped" not in again.stderr


def test_a_drop_is_said_at_verbose(tmp_path: Path) -> None:
    write_profile(tmp_path)
    assert llmc("call", "count.big", "size=1").returncode == 0
    eras = Path(os.environ["LLMC_STATE_DIR"]) / "servers.json"  # initialize-era: it hears list_changed
    remembered = json.loads(eras.read_text())
    eras.write_text(json.dumps({k: {**v, "era": "legacy", "version": "2025-11-25"} for k, v in remembered.items()}))
    lines = [
        {"id": 1, "tool": "count.search", "arguments": {"query": "a"}},
        {"id": 2, "tool": "count.announce", "arguments": {}},
        {"id": 3, "tool": "count.search", "arguments": {"query": "a"}},
    ]
    batch = "".join(json.dumps(line) + "\n" for line in lines)
    quiet = llmc("call", "--batch", "-", stdin=batch)
    assert quiet.returncode == 0 and "dropped" not in quiet.stderr, quiet.stderr
    said = llmc("-v", "call", "--batch", "-", stdin=batch)
    assert said.returncode == 0, said.stderr
    assert re.search(
        r"llmc: cache: dropped \d+ cached result\(s\) of count: it announced notifications/tools/list_changed", said.stderr
    )

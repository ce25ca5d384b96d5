"""Issue 35: cached results cross identities. An entry's key holds what makes two answers
different: the profile by identity (its resolved path, not its name) and its server's table, and
for a `per_session` server the host session (a local command has none: not cached). A result
holding a secret value is never stored. Lowering `ttl_seconds` shortens entries stored under the
old TTL (their age is judged when read), and -v says an entry was dropped. Through the real CLI
in front of tests/peers/counting_server.py (an `mcp` SDK server that counts its calls)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.cache.test_results import call, calls, write_profile
from tests.helpers import llmc

SECRET = "s3cr3t-value-7f9c2a"


def test_cached_results_do_not_cross_profiles_of_one_name(tmp_path: Path) -> None:
    named = write_profile(tmp_path)  # profiles/default.toml
    elsewhere = tmp_path / "other" / "default.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(named.read_text())
    assert "cached" not in call("-p", "default", "count.search", "query=x")
    assert "cached" not in call("-p", str(elsewhere), "count.search", "query=x")
    assert call("-p", str(elsewhere), "count.search", "query=x")["cached"] is True
    assert call("-p", "default", "count.search", "query=x")["cached"] is True
    assert len(calls(tmp_path)) == 2


def test_a_per_session_servers_results_are_not_shared_between_sessions(tmp_path: Path) -> None:
    profile = write_profile(tmp_path)
    profile.write_text(profile.read_text().replace('sandbox = "none"\n', 'sandbox = "none"\nper_session = true\n'))
    for _ in range(2):
        assert "cached" not in call("count.search", "query=x")  # each command is its own session
    assert len(calls(tmp_path)) == 2

    from llmc_cli.config.profiles import load_profile
    from llmc_cli.model import Tool, ToolCall
    from llmc_cli.services import caching

    loaded, tool = load_profile("default"), Tool("count", "search", {"name": "search"})
    one = ToolCall("count", "search", {"query": "x"})
    keys = {caching.key(loaded, None, tool, one, "h", session=s) for s in ("a", "b", None)}
    assert len(keys) == 3


def test_a_result_holding_a_secret_is_not_cached(tmp_path: Path) -> None:
    write_profile(tmp_path)
    env = {"MY_API_TOKEN": SECRET}
    for _ in range(2):
        proc = llmc("call", "count.search", f"query={SECRET}", "--format", "json", env=env)
        assert proc.returncode == 0 and "cached" not in proc.json(), proc.stderr
    assert len(calls(tmp_path)) == 2
    results = Path(os.environ["LLMC_STATE_DIR"]) / "results"
    assert not any(SECRET in p.read_text() for p in results.glob("*.json")) if results.exists() else True


def test_lowering_the_ttl_shortens_entries_stored_under_the_old_one(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, 'ttl_seconds = 300\ntools = ["count.search"]')
    assert "cached" not in call("count.search", "query=x")
    assert call("count.search", "query=x")["cached"] is True
    profile.write_text(profile.read_text().replace("ttl_seconds = 300", "ttl_seconds = 1"))
    time.sleep(1.2)
    proc = llmc("-v", "call", "count.search", "query=x", "--format", "json")
    assert proc.returncode == 0 and "cached" not in json.loads(proc.stdout), proc.stderr
    assert "dropped (older than ttl_seconds = 1" in proc.stderr, proc.stderr
    assert len(calls(tmp_path)) == 2


def test_a_server_reached_through_other_expanded_values_is_another_server(tmp_path: Path) -> None:
    """The profile's text is the same, but ${VAR} expands to another value (another account's
    token, another host, here another count file): its cached results are not served for it."""
    profile = write_profile(tmp_path)
    counts = str(tmp_path / "calls.txt")
    profile.write_text(profile.read_text().replace(json.dumps(counts), '"${COUNT_TO}"'))
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    for where in (first, second):
        proc = llmc("call", "count.search", "query=x", "--format", "json", env={"COUNT_TO": str(where)})
        assert proc.returncode == 0 and "cached" not in proc.json(), proc.stdout
    assert len(first.read_text().splitlines()) == len(second.read_text().splitlines()) == 1
    proc = llmc("call", "count.search", "query=x", "--format", "json", env={"COUNT_TO": str(first)})
    assert proc.json()["cached"] is True  # the same values: the same server


def test_an_entrys_file_name_is_no_unkeyed_hash_of_an_expanded_secret(tmp_path: Path) -> None:
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.model import ServerSpec, Tool, ToolCall
    from llmc_cli.services import caching

    write_profile(tmp_path)
    loaded, tool = load_profile("default"), Tool("count", "search", {"name": "search"})
    one = ToolCall("count", "search", {"query": "x"})
    spec = ServerSpec("count", ("srv",), env={"TOKEN": SECRET})
    keys = {caching.key(loaded, None, tool, one, "h", reach=caching.reach(spec, k)) for k in (b"k1" * 16, b"k2" * 16)}
    assert len(keys) == 2  # keyed: another installation's key, another name

"""[cache]: a listed read-only tool's result is served from the cache for an identical call
within the TTL, through the real CLI (in-process) in front of an `mcp` SDK server that counts its
calls in a file (tests/peers/counting_server.py), so a call that reached it is seen across runs."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import audit_trail, llmc, profile_file, sdk_server

TOKEN = "tok-4f1d9c2b7a6e5d3c"


def write_profile(tmp_path: Path, cache: str = 'tools = ["count.*"]', extra: str = "", description: str = "") -> Path:
    env = {"COUNT_FILE": str(tmp_path / "calls.txt"), **({"SEARCH_DESCRIPTION": description} if description else {})}
    return profile_file(
        Path(os.environ["LLMC_CONFIG_DIR"]),
        f"""
[servers.count]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("counting_server.py")[1])}]
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}
sandbox = "none"

[cache]
{cache}
{extra}
""",
    )


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def call(*args: str) -> dict:
    proc = llmc("call", *args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def audit(tmp_path: Path) -> list[dict]:
    return audit_trail(Path(os.environ["LLMC_STATE_DIR"]))


def test_a_second_identical_call_within_the_ttl_is_served_from_the_cache_and_audited(tmp_path: Path) -> None:
    write_profile(tmp_path)
    first = call("count.search", "query=tides")
    second = call("count.search", "query=tides")
    assert "cached" not in first and second["cached"] is True
    assert second["content"] == first["content"] == [{"type": "text", "text": "tides #1"}]
    assert calls(tmp_path) == ['search {"query": "tides", "token": ""}']
    outcomes = [r for r in audit(tmp_path) if r["event"] == "outcome"]
    decisions = [r for r in audit(tmp_path) if r["event"] == "decision"]
    assert [r["outcome"] for r in outcomes] == ["ok", "cached"] and [r["decision"] for r in decisions] == ["allow"] * 2
    assert outcomes[1]["resultSha256"] == outcomes[0]["resultSha256"]
    assert llmc("audit", "verify").returncode == 0
    tail = llmc("audit", "tail", "--outcome", "cached", "--format", "jsonl")
    assert [json.loads(line)["outcome"] for line in tail.stdout.splitlines()] == ["cached"]
    table = llmc("call", "count.search", "query=tides", "--format", "table")
    assert "cached" in table.stdout and len(calls(tmp_path)) == 1


def test_an_entry_expires_after_its_ttl(tmp_path: Path) -> None:
    write_profile(tmp_path, 'ttl_seconds = 1\ntools = ["count.search"]')
    call("count.search", "query=a")
    time.sleep(1.2)
    # one run, so the second line comes well within the TTL of the first's fresh answer
    line = json.dumps({"tool": "count.search", "arguments": {"query": "a"}})
    proc = llmc("call", "--batch", "-", stdin=f"{line}\n{line}\n")
    assert [json.loads(out).get("cached", False) for out in proc.stdout.splitlines()] == [False, True]
    assert len(calls(tmp_path)) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["count.delete", "name=x"],
        ["count.plain", "name=x"],
        ["count.fail", "name=x"],
        ["count.big", "size=300000"],
        ["count.search", "query=a", "--no-cache"],
    ],
    ids=["destructive", "unannotated", "isError", "too-big", "no-cache"],
)
def test_what_is_never_answered_from_the_cache(tmp_path: Path, args: list[str]) -> None:
    write_profile(tmp_path, extra='[policy]\nallow = ["count.*"]')
    for _ in range(2):
        assert "cached" not in call(*args, "--yes")
    assert len(calls(tmp_path)) == 2
    assert "cached" not in [r.get("outcome") for r in audit(tmp_path)]


def test_policy_check_and_tools_lint_say_what_is_cached(tmp_path: Path) -> None:
    write_profile(tmp_path, 'ttl_seconds = 300\ntools = ["count.search", "count.delete", "count.plain"]')
    checked = json.loads(llmc("policy", "check", "count.search", "query=a").stdout)
    assert checked["cache"] == "cached for 300 s"
    for tool in ("delete", "plain"):
        proc = llmc("policy", "check", f"count.{tool}", "name=a")
        assert json.loads(proc.stdout)["cache"] == "listed in [cache] tools but not read-only: never cached"
    assert "cache" not in json.loads(llmc("policy", "check", "count.big", "size=1").stdout)
    findings = json.loads(llmc("tools", "lint", "--format", "json").stdout)["findings"]
    assert sorted(f["tool"] for f in findings if f["target"] == "cache") == ["delete", "plain"]


def test_hints_in_the_profile_decide_what_is_read_only(tmp_path: Path) -> None:
    write_profile(
        tmp_path, extra='[policy.hints."count.plain"]\nreadOnly = true\n[policy.hints."count.search"]\nreadOnly = false'
    )
    call("count.plain", "name=a")
    assert call("count.plain", "name=a")["cached"] is True
    call("count.search", "query=a")
    assert "cached" not in call("count.search", "query=a")
    assert len(calls(tmp_path)) == 3


def test_different_arguments_miss_and_secrets_stay_off_the_disk(tmp_path: Path) -> None:
    write_profile(tmp_path)
    call("count.search", "query=a", f"token={TOKEN}")
    assert "cached" not in call("count.search", "query=b", f"token={TOKEN}")
    assert "cached" not in call("count.search", "query=a", "token=other-secret-value-99")
    assert call("count.search", "query=a", f"token={TOKEN}")["cached"] is True
    assert len(calls(tmp_path)) == 3
    results = Path(os.environ["LLMC_STATE_DIR"]) / "results"
    assert stat.S_IMODE(results.stat().st_mode) == 0o700
    entries = list(results.iterdir())
    assert len(entries) == 3
    for entry in entries:
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600
        assert TOKEN not in entry.read_text() and TOKEN not in entry.name and "query" not in entry.read_text()


def test_list_changed_drops_the_servers_entries(tmp_path: Path) -> None:
    write_profile(tmp_path)
    # A 2026-07-28 session hears of changes only by subscriptions/listen, which llmc's client does
    # not speak: the server is remembered as initialize-era, so llmc's next runs start it so.
    assert call("count.big", "size=1")["isError"] is False
    eras = Path(os.environ["LLMC_STATE_DIR"]) / "servers.json"
    remembered = json.loads(eras.read_text())
    eras.write_text(json.dumps({k: {**v, "era": "legacy", "version": "2025-11-25"} for k, v in remembered.items()}))
    batch = (
        "\n".join(
            json.dumps(line)
            for line in [
                {"id": 1, "tool": "count.search", "arguments": {"query": "a"}},
                {"id": 2, "tool": "count.search", "arguments": {"query": "a"}},
                {"id": 3, "tool": "count.announce", "arguments": {}},
                {"id": 4, "tool": "count.search", "arguments": {"query": "a"}},
                {"id": 5, "tool": "count.search", "arguments": {"query": "a"}},
            ]
        )
        + "\n"
    )
    proc = llmc("call", "--batch", "-", "--no-cache", stdin=batch)
    assert proc.returncode == 0, proc.stderr
    assert not any("cached" in json.loads(line) for line in proc.stdout.splitlines())  # but stored
    proc = llmc("call", "--batch", "-", stdin=batch)
    assert proc.returncode == 0, proc.stderr
    lines = {json.loads(line)["id"]: json.loads(line) for line in proc.stdout.splitlines()}
    # 1: filled by the --no-cache run; 3 announced a changed list: 4 asks the server again
    assert [lines[i].get("cached", False) for i in (1, 2, 3, 4, 5)] == [True, True, False, False, True]
    assert len(calls(tmp_path)) == 1 + 5 + 2


def test_a_changed_tool_definition_never_meets_an_old_entry(tmp_path: Path) -> None:
    write_profile(tmp_path)
    call("count.search", "query=a")
    write_profile(tmp_path, description="Search the index, differently.")
    assert "cached" not in call("count.search", "query=a")
    assert call("count.search", "query=a")["cached"] is True
    assert len(calls(tmp_path)) == 2


def test_cache_clear(tmp_path: Path) -> None:
    write_profile(tmp_path)
    call("count.search", "query=a")
    cleared = json.loads(llmc("cache", "clear", "--server", "other").stdout)
    assert cleared == {"cleared": 0, "server": "other", "store": "files"}
    assert call("count.search", "query=a")["cached"] is True
    assert json.loads(llmc("cache", "clear", "--server", "count").stdout)["cleared"] == 1
    assert "cached" not in call("count.search", "query=a")
    assert json.loads(llmc("cache", "clear").stdout)["cleared"] == 1
    assert len(calls(tmp_path)) == 2


def test_the_directory_stays_within_its_bound_oldest_out_first(tmp_path: Path) -> None:
    from llmc_cli.store.results import FileResultCache

    cache = FileResultCache(tmp_path / "results", max_total_bytes=3100)
    result = {"content": [{"type": "text", "text": "x" * 900}]}
    for n in range(5):
        cache.put(f"{n:064x}", "s", result, ttl=60 + n)
    kept = [n for n in range(5) if cache.get(f"{n:064x}", "s") is not None]
    assert kept == [2, 3, 4]
    assert sum(p.stat().st_size for p in (tmp_path / "results").iterdir()) <= 3100
    cache.put("f" * 64, "s", result, ttl=0.01)
    time.sleep(0.05)
    assert cache.get("f" * 64, "s") is None  # expired: gone from the disk too
    assert not any("f" * 64 in p.name for p in (tmp_path / "results").iterdir())


def test_the_policy_decides_every_call_first_and_a_cached_answer_counts_against_rate_limits(tmp_path: Path) -> None:
    write_profile(tmp_path, extra="[policy]\ncalls_per_minute = 2")
    call("count.search", "query=a")
    assert call("count.search", "query=a")["cached"] is True
    limited = llmc("call", "count.search", "query=a")
    assert limited.returncode == 4 and "rate" in limited.stderr.lower()
    write_profile(tmp_path, extra='[policy]\ndeny = ["count.search"]')
    denied = llmc("call", "count.search", "query=a")
    assert denied.returncode == 4 and denied.stdout == ""
    assert len(calls(tmp_path)) == 1
    records = audit(tmp_path)
    assert [r.get("outcome") for r in records if r["event"] == "outcome"] == ["ok", "cached", "denied"]
    assert [r["decision"] for r in records if r["event"] == "decision"] == ["allow", "allow", "allow", "deny"]


def test_a_models_repeated_call_in_ask_is_answered_from_the_cache(tmp_path: Path) -> None:
    from tests.fakes.llm import FakeLLM
    from tests.fakes.scripts import turn

    search = {"query": "tides"}
    script = [
        turn("openai", calls=[("c1", "search", search)]),
        turn("openai", calls=[("c2", "search", search)]),
        turn("openai", text="done"),
    ]
    with FakeLLM("openai", script) as fake:
        path = write_profile(tmp_path)
        path.write_text(path.read_text() + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n')
        proc = llmc("ask", "search twice", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["steps"]
    assert [s.get("cached", False) for s in steps] == [False, True] and steps[0]["seen"] == steps[1]["seen"]
    assert len(calls(tmp_path)) == 1


def test_a_cache_pattern_without_a_server_is_refused(tmp_path: Path) -> None:
    write_profile(tmp_path, 'tools = ["search"]')
    proc = llmc("call", "count.search", "query=a")
    assert proc.returncode == 3 and "SERVER.TOOL glob" in proc.stderr and proc.stdout == ""
    assert calls(tmp_path) == []

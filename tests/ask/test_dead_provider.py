"""Issue 39, "every server starts before the first model turn" and "Connection refused (after 4
attempts) without the URL": `ask` offers its model the tools an earlier run listed (cached) and
starts a server only when the model calls one of its tools, so a wrong API key or a dead base
URL starts no server; without a cached listing the servers start first, and a refused base URL
ends the run before they are waited for. A refused connection is said with the URL, once (no
retries), exit 8. The real CLI, the real SDKs against the wire-level fakes and a closed loopback
port, the SDK test server started through a script that logs each start."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, anthropic_error, openai_error
from tests.fakes.scripts import turn
from tests.helpers import free_port, llmc, profile_file, sdk_server

SLOW = 8.0  # seconds a slow server sleeps before it reads initialize


def server_table(name: str, started: Path, slow: Path) -> str:
    """[servers.NAME]: the SDK test server, which first appends its name and pid to `started`
    and sleeps SLOW seconds when the file `slow` exists."""
    script = (
        "import os, runpy, sys, time; "
        f"open({str(started)!r}, 'a').write({name!r} + ' ' + str(os.getpid()) + ' ' + str(time.time()) + '\\n'); "
        f"os.path.exists({str(slow)!r}) and time.sleep({SLOW}); "
        f"sys.argv = [{sdk_server('sdk_server.py')[1]!r}]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return f'[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(script)}]\n'


def write_profile(root: Path, api: str, base_url: str) -> tuple[Path, Path]:
    """Two slow-starting servers a and b; returns (the start log, the file that makes them slow)."""
    started, slow = root / "started.log", root / "slow"
    profile_file(
        root / "config",
        server_table("a", started, slow)
        + server_table("b", started, slow)
        + f'\n[llm]\nprovider = "{api}"\nmodel = "m"\nbase_url = "{base_url}"\n',
    )
    return started, slow


def starts(log: Path) -> list[tuple[str, int]]:
    """(server, pid) of each start, in order."""
    return [(name, pid) for name, pid, _ in start_times(log)]


def start_times(log: Path) -> list[tuple[str, int, float]]:
    rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return [(row[0], int(row[1]), float(row[2])) for row in rows]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def none_left(log: Path) -> bool:
    deadline = time.monotonic() + SLOW + 20
    while any(alive(pid) for _, pid in starts(log)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(alive(pid) for _, pid in starts(log))


def conversations() -> list[object]:
    listed = llmc("conversations", "list")
    assert listed.returncode == 0, listed.stderr
    return list(listed.json()["conversations"])


def test_without_a_cached_listing_a_refused_base_url_ends_ask_before_slow_servers_started(isolated_dirs: Path) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    started, slow = write_profile(isolated_dirs, "openai", base_url)
    slow.touch()
    proc = llmc("ask", "hi", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 8, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"llmc: openai: connection to {base_url}: Connection refused", proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert none_left(started), "a server it began was left running"
    assert conversations() == []


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_with_cached_listings_a_wrong_key_or_a_dead_base_url_starts_no_server(isolated_dirs: Path, api: str) -> None:
    env = {"OPENAI_API_KEY": "wrong", "ANTHROPIC_API_KEY": "wrong"}
    with FakeLLM(api, [turn(api, text="Hello.")]) as fake:
        started, slow = write_profile(isolated_dirs, api, fake.base_url)
        first = llmc("ask", "hi", env=env)  # the servers start (not slow yet) and their listings are cached
        assert first.returncode == 0, first.stderr
        assert sorted(name for name, _ in starts(started)) == ["a", "b"]
        offered = {t.get("name") or t.get("function", {}).get("name") for t in fake.requests[0].body["tools"]}
        assert {"a_echo", "b_echo"} <= offered
    assert none_left(started)
    slow.touch()
    saved = conversations()
    assert len(saved) == 1

    wrong_key = (
        openai_error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key")
        if api == "openai"
        else anthropic_error(401, "authentication_error", "invalid x-api-key")
    )
    with FakeLLM(api, [wrong_key]) as fake:
        write_profile(isolated_dirs, api, fake.base_url)
        proc = llmc("ask", "hi", env=env)
        assert proc.returncode == 8, proc.stderr
        assert "auth" in proc.stderr and proc.stdout == ""
        # the same tools as the run that listed them, from the cache
        again = {t.get("name") or t.get("function", {}).get("name") for t in fake.requests[0].body["tools"]}
        assert again == offered
    dead = f"http://127.0.0.1:{free_port()}" + ("/v1" if api == "openai" else "")
    write_profile(isolated_dirs, api, dead)
    refused = llmc("ask", "hi", env=env)
    assert refused.returncode == 8, refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == f"llmc: {api}: connection to {dead}: Connection refused", refused.stderr
    assert sorted(name for name, _ in starts(started)) == ["a", "b"], "a server started for a run that never began"
    assert conversations() == saved  # neither failed first turn was kept


def test_a_cached_tool_called_starts_only_its_server(isolated_dirs: Path) -> None:
    with FakeLLM("openai", [turn("openai", text="Hello.")]) as fake:
        started, _slow = write_profile(isolated_dirs, "openai", fake.base_url)
        assert llmc("ask", "hi", env={"OPENAI_API_KEY": "k"}).returncode == 0
    before = len(starts(started))
    script = [turn("openai", calls=[("c1", "b_echo", {"message": "pong"})]), turn("openai", text="Done.")]
    with FakeLLM("openai", script) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        proc = llmc("ask", "--yes", "echo pong", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    step = proc.json()["steps"][0]
    assert (step["tool"], step["outcome"]) == ("b.echo", "ok"), step
    assert [name for name, _ in starts(started)[before:]] == ["b"]


def test_a_listing_that_changed_is_judged_live_and_cached_anew(isolated_dirs: Path) -> None:
    """The cached entry names a tool the server no longer has (an upgraded server): the call of
    it fails for the model (the live listing judges), and the entry is rewritten for next time."""
    from llmc_cli.services import runs_listings

    with FakeLLM("openai", [turn("openai", text="Hello.")]) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        assert llmc("ask", "hi", env={"OPENAI_API_KEY": "k"}).returncode == 0
    entries = sorted((isolated_dirs / "state" / "tool-listings").glob("*.json"))
    assert len(entries) == 2
    for entry in entries:  # each server's `echo` was `echo_old` when it was cached
        body = json.loads(entry.read_text())
        for tool in body["tools"]:
            if tool["name"] == "echo":
                tool["name"] = "echo_old"
        body["digest"] = runs_listings._digest(body["tools"])
        entry.write_text(json.dumps(body))
    script = [turn("openai", calls=[("c1", "a_echo_old", {"message": "x"})]), turn("openai", text="It is gone.")]
    with FakeLLM("openai", script) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        proc = llmc("-v", "ask", "echo", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    step = proc.json()["steps"][0]
    assert (step["tool"], step["outcome"]) == ("a.echo_old", "failed") and "echo_old" in step["seen"], step
    assert "the tools of a changed since an earlier run listed them" in proc.stderr
    names = {e.name: {t["name"] for t in json.loads(e.read_text())["tools"]} for e in entries}
    assert sorted("echo" in n and "echo_old" not in n for n in names.values()) == [False, True]  # a's anew, b's untouched


def test_a_damaged_entry_is_no_entry(isolated_dirs: Path) -> None:
    with FakeLLM("openai", [turn("openai", text="Hello."), turn("openai", text="Again.")]) as fake:
        started, _slow = write_profile(isolated_dirs, "openai", fake.base_url)
        assert llmc("ask", "hi", env={"OPENAI_API_KEY": "k"}).returncode == 0
        for entry in (isolated_dirs / "state" / "tool-listings").glob("*.json"):
            body = json.loads(entry.read_text())
            body["tools"][0]["description"] = "tampered"  # the digest no longer matches
            entry.write_text(json.dumps(body))
        assert llmc("ask", "hi", env={"OPENAI_API_KEY": "k"}).returncode == 0
        assert "tampered" not in json.dumps(fake.requests[1].body["tools"])
    assert [name for name, _ in starts(started)].count("a") == 2  # listed live again


def test_the_servers_a_turn_calls_start_at_once(isolated_dirs: Path) -> None:
    """Two calls of one turn, of two servers not started yet, that run one after the other (not
    read-only): both servers start when the turn's calls are known, not each as its call runs."""
    with FakeLLM("openai", [turn("openai", text="Hello.")]) as fake:
        started, slow = write_profile(isolated_dirs, "openai", fake.base_url)
        assert llmc("ask", "hi", env={"OPENAI_API_KEY": "k"}).returncode == 0
    before = len(starts(started))
    slow.touch()
    calls = [("c1", "a_echo", {"message": "1"}), ("c2", "b_echo", {"message": "2"})]
    with FakeLLM("openai", [turn("openai", calls=calls), turn("openai", text="Done.")]) as fake:
        write_profile(isolated_dirs, "openai", fake.base_url)
        proc = llmc("ask", "--yes", "echo twice", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    assert [s["outcome"] for s in proc.json()["steps"]] == ["ok", "ok"]
    (a, _, at_a), (b, _, at_b) = start_times(started)[before:]
    assert {a, b} == {"a", "b"} and abs(at_a - at_b) < SLOW / 2, "the second server started only once the first call ended"

"""A call through a keeper takes its tool from the keeper's listing: the keeper lists a server's
tools once (again after notifications/tools/list_changed) and sends them with every attach
reply, so `llmc call --session` makes one round trip (tools/call), not two. What the tool
definition decides stays: unknown tools, argument checks, a changed listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmc_cli.keeper.transport import AttachReply, attach
from llmc_cli.mcp.hooks import ClientHooks
from tests.helpers import profile_file, sdk_server
from tests.session.test_keeper import Keepers, keepers, one_line  # noqa: F401 - the fixture


def growing_server(keepers: Keepers, log: Path, *extra: str) -> None:  # noqa: F811 - the fixture's type
    """Profile server `g`: the SDK test server that logs every tools/list and can grow a tool."""
    python, script = sdk_server("sdk_server.py")
    args = ", ".join(f'"{a}"' for a in (script, "--list-log", str(log), "--growing", *extra))
    profile_file(Path(keepers.env["LLMC_CONFIG_DIR"]), f'[servers.g]\ncommand = "{python}"\nargs = [{args}]\n')


def listings(log: Path) -> int:
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_calls_through_a_keeper_share_its_one_listing(keepers: Keepers, tmp_path: Path, era: str) -> None:  # noqa: F811 - the fixture imported above
    """2026-07-28: the keeper hears of changes on a subscriptions/listen stream, and keeps the
    listing. The SDK server declares no tools.listChanged in the initialize era (it would send
    them unasked, but does not promise to): there each caller lists, as without a keeper."""
    log = tmp_path / "lists.log"
    growing_server(keepers, log)
    if era == "legacy":  # the era cache says so: the keeper speaks the initialize era to it
        assert keepers.run("call", "g.echo", "message=first", "--yes").returncode == 0
        eras = keepers.state / "servers.json"
        remembered = json.loads(eras.read_text())
        eras.write_text(json.dumps({k: {**v, "era": "legacy", "version": "2025-11-25"} for k, v in remembered.items()}))
        log.unlink()
    status = keepers.start("listing", "-s", "g")
    assert status["servers"][0]["protocolVersion"] == ("2025-11-25" if era == "legacy" else "2026-07-28")
    for i in range(3):
        proc = keepers.call("g.echo", f"message=m{i}", session="listing")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["content"][0]["text"] == f"m{i}"
    if era == "legacy":
        assert listings(log) == 3  # one per call: nothing says the keeper would hear of a change
        assert keepers.call("g.grow", "name=fresh", session="listing").returncode == 0
        fresh = keepers.call("g.fresh", "message=hi", session="listing")
        assert fresh.returncode == 0 and json.loads(fresh.stdout)["content"][0]["text"] == "fresh: hi", fresh.stderr
        return
    assert listings(log) == 1  # the keeper's own, for every caller: no tools/list per call

    # What the definition decides is decided as before, from the keeper's listing.
    unknown = keepers.call("g.ecko", "message=x", session="listing")
    assert unknown.returncode == 2 and one_line(unknown.stderr) == (
        "llmc: server g has no tool named 'ecko' (did you mean 'echo'?)"
    ), unknown.stderr
    bad = keepers.call("g.echo", "message:=3", session="listing")
    assert bad.returncode == 2 and one_line(bad.stderr) == "llmc: g.echo: argument message: expected string, got 3"
    assert listings(log) == 1

    # The server announces a changed listing: the keeper lists again, and the new tool is callable.
    grown = keepers.call("g.grow", "name=fresh", session="listing")
    assert grown.returncode == 0, grown.stderr
    fresh = keepers.call("g.fresh", "message=hi", session="listing")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["content"][0]["text"] == "fresh: hi"
    assert listings(log) == 2
    again = keepers.call("g.fresh", "message=again", session="listing")
    assert again.returncode == 0 and listings(log) == 2, again.stderr


def test_a_change_announced_after_the_attach_makes_its_listing_stale(keepers: Keepers, tmp_path: Path) -> None:  # noqa: F811 - the fixture imported above
    log = tmp_path / "lists.log"
    growing_server(keepers, log)
    keepers.start("stale", "-s", "g")
    heard: list[str] = []
    session = attach(
        str(keepers.sock("stale")),
        "stale",
        "g",
        timeout=30,
        hooks=ClientHooks(on_list_changed=lambda server, method: heard.append(f"{server} {method}")),
    )
    try:
        # The listing came with the attach reply; the server then changes its tools.
        assert session.call_tool("grow", {"name": "later"})["content"][0]["text"] == "added later"
        assert heard == ["g notifications/tools/list_changed"]  # the caller's own hook still hears it
        names = {tool["name"] for tool in session.list_tools()}  # asked of the server, not the stale copy
        assert {"echo", "grow", "later"} <= names
        assert listings(log) == 2  # the keeper's at the attach, and this one
    finally:
        session.close()


def test_an_attach_reply_without_tools_leaves_the_listing_to_the_server() -> None:
    """A keeper of an older llmc sends no tools: the caller lists them itself."""
    base = {"era": "legacy", "protocolVersion": "2025-11-25", "serverInfo": {}, "capabilities": {"tools": {}}}
    assert AttachReply.from_json(base, "old").tools is None
    sent = AttachReply.from_json({**base, "tools": [{"name": "echo"}, "junk"]}, "new")
    assert sent.tools == [{"name": "echo"}]

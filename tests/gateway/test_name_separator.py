"""`[serve] name_separator` / `llmc serve --name-separator`: tool and prompt names a host can hand
to a model provider (^[a-zA-Z0-9_-]{1,64}$), mapped back to exactly one server and tool, through
the real gateway with the `mcp` SDK's client as the host (stdio and HTTP)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.test_http import sdk_host, start, stop
from tests.gateway.test_stdio import host, run
from tests.helpers import PEERS, llmc, llmc_executable

PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LONG = "x" * 70
# server -> its tools (and prompts): names with dots, underscores and double underscores, one too
# long for a provider, and two pairs that become the same name under "__" (a + b__c, a__b + c)
SERVERS: dict[str, list[str]] = {
    "my_files": ["--prompt", "review.code", "files.read", "snake_case", "double__under", LONG],
    "a": ["b__c", "search_tools"],
    "a__b": ["c"],
}


def odd_profile(tmp_path: Path, serve: str = "") -> Path:
    lines = []
    for server, args in SERVERS.items():
        lines += [f"[servers.{server}]", f"command = {json.dumps(sys.executable)}"]
        lines += [f"args = {json.dumps([str(PEERS / 'odd_names.py'), *args])}", 'sandbox = "none"', ""]
    lines += ["[policy.hints]", *(f'"{s}.*" = {{ readOnly = true }}' for s in SERVERS), "", "[serve]", serve]
    path = tmp_path / "odd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def expected(separator: str) -> dict[str, tuple[str, str]]:
    """The names a host must see -> (server, tool) they must reach: the plain ones exactly, the
    renamed ones by their shape (checked by `matches`)."""
    j = separator
    return {
        f"my_files{j}files_read": ("my_files", "files.read"),
        f"my_files{j}snake_case": ("my_files", "snake_case"),
        f"my_files{j}double__under": ("my_files", "double__under"),
        f"a{j}search_tools": ("a", "search_tools"),
    }


def text(result: Any) -> str:
    return str(result.content[0].text)


async def check_names(client: Any, separator: str) -> None:
    """List, check every name, call every tool back by the name it was given, and the prompt."""
    tools = [t.name for t in (await client.list_tools()).tools]
    assert all(PROVIDER_SAFE.match(name) for name in tools), tools
    assert len(set(tools)) == len(tools) == 7
    plain = expected(separator)
    assert set(plain) <= set(tools)
    for name, (_server, tool) in plain.items():
        assert text(await client.call_tool(name, {"message": "hi"})) == f"{tool}: hi"
    long_name = next(n for n in tools if n.startswith(f"my_files{separator}xxx"))
    assert len(long_name) == 64 and re.search(r"_[0-9a-f]{8}$", long_name)
    assert text(await client.call_tool(long_name, {"message": "long"})) == f"{LONG}: long"
    # a + b__c and a__b + c: under "__" the same name, so both get a hash suffix; each reaches its own
    rest = sorted(set(tools) - set(plain) - {long_name})
    reached = sorted([text(await client.call_tool(name, {"message": name})) for name in rest])
    assert reached == sorted([f"b__c: {rest[0]}", f"c: {rest[1]}"]) or reached == sorted([f"b__c: {rest[1]}", f"c: {rest[0]}"])
    if separator == "__":
        assert all(re.fullmatch(r"a__b__c_[0-9a-f]{8}", name) for name in rest), rest
    # the dotted spelling reaches the same tool
    assert text(await client.call_tool("my_files.files.read", {"message": "dotted"})) == "files.read: dotted"
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert prompts == [f"my_files{separator}review_code"]
    got = await client.get_prompt(prompts[0], {"topic": "names"})
    assert got.messages[0].content.text == "review.code: names"


@pytest.mark.parametrize("separator", ["__", "_"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_host_on_stdio_gets_provider_safe_names_that_call_back(tmp_path: Path, separator: str, mode: str) -> None:
    profile = odd_profile(tmp_path, f'name_separator = "{separator}"')

    async def work() -> None:
        async with host(profile, mode) as client:
            await check_names(client, separator)

    run(work)


@pytest.mark.parametrize("separator", ["__", "_"])
def test_sdk_host_over_http_gets_provider_safe_names_said_once(tmp_path: Path, separator: str) -> None:
    gateway = start(odd_profile(tmp_path), "--name-separator", separator)
    try:

        async def work() -> None:
            async with sdk_host(gateway.url, "auto") as client:
                await check_names(client, separator)
                await client.list_tools()  # listed again: nothing more is said

        run(work)
    finally:
        stderr = stop(gateway)
    renamed = [line for line in stderr.splitlines() if "is served as" in line]
    assert len(renamed) == len(set(renamed)) >= 3, stderr  # the long one, and both of a clashing pair
    assert any(f"tool my_files.{LONG} is served as" in line and "^[a-zA-Z0-9_-]{1,64}$" in line for line in renamed)
    if separator == "__":
        assert sum("another tool would be named 'a__b__c' too" in line for line in renamed) == 2


def test_the_default_keeps_dotted_names(tmp_path: Path) -> None:
    async def work() -> None:
        async with host(odd_profile(tmp_path), "auto") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"my_files.files.read", "a.b__c", "a__b.c", f"my_files.{LONG}"} <= tools
            assert text(await client.call_tool("a__b.c", {"message": "m"})) == "c: m"

    run(work)


@pytest.mark.parametrize("separator, findings", [(".", True), ("__", False), ("_", False)])
def test_the_linter_finds_no_provider_name_problem(tmp_path: Path, separator: str, findings: bool) -> None:
    gateway = shlex.join([llmc_executable(), "serve", "-p", str(odd_profile(tmp_path)), "--name-separator", separator])
    linted = llmc("tools", "lint", "--stdio", gateway, "--provider", "openai", "--provider", "anthropic")
    assert linted.returncode == 0, linted.stderr
    names = [f for f in json.loads(linted.stdout)["findings"] if f["path"] == "$.name"]
    assert bool(names) is findings, names


def test_tool_search_meta_tools_and_pinned_take_both_spellings(tmp_path: Path) -> None:
    # `_`: a server's tool that would be named llmc_search_tools moves; the gateway's own keeps it
    SERVERS["llmc_search"] = ["tools"]
    try:
        profile = odd_profile(tmp_path, 'name_separator = "_"\ntool_search = true\npinned = ["my_files.snake_*", "a__b_c"]')
    finally:
        del SERVERS["llmc_search"]

    async def work() -> None:
        async with host(profile, "auto") as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            assert tools[:2] == ["llmc_search_tools", "llmc_call_tool"]
            assert set(tools[2:]) == {"my_files_snake_case", "a__b_c"}  # pinned in the dotted and in the host's spelling
            found = (await client.call_tool("llmc_search_tools", {"query": "name files.read message"})).structured_content
            names = [t["name"] for t in found["tools"]]
            assert "my_files_files_read" in names and all(PROVIDER_SAFE.match(n) for n in names)
            for spelling in ("my_files_files_read", "my_files.files.read"):
                called = await client.call_tool("llmc_call_tool", {"name": spelling, "arguments": {"message": "s"}})
                assert text(called) == "files.read: s"
            dotted = await client.call_tool("llmc.call_tool", {"name": "a__b_c", "arguments": {"message": "d"}})
            assert text(dotted) == "c: d"
            moved = await client.call_tool("llmc_call_tool", {"name": "llmc_search_tools", "arguments": {}})
            assert moved.is_error and "needs `name`" in text(moved)
            everything = await client.call_tool("llmc_search_tools", {"query": "tools", "limit": 20})
            shown = {t["name"] for t in everything.structured_content["tools"]}
            clash = [n for n in shown if n.startswith("llmc_search_tools_")]
            assert len(clash) == 1 and text(await client.call_tool("llmc_call_tool", {"name": clash[0]})) == "tools: "

    run(work)


@pytest.mark.parametrize(
    "line, message",
    [
        ('name_separator = "::"', "serve.name_separator: Input should be '.', '__' or '_'"),
        ('name_seperator = "__"', "serve.name_seperator: unknown key (did you mean 'name_separator'?)"),
    ],
)
def test_bad_separator_settings(tmp_path: Path, line: str, message: str) -> None:
    proc = llmc("serve", "-p", str(odd_profile(tmp_path, line)))
    assert proc.returncode == 3 and message in proc.stderr and proc.stdout == ""
    assert "Traceback" not in proc.stderr


def test_a_bad_separator_option(tmp_path: Path) -> None:
    proc = llmc("serve", "-p", str(odd_profile(tmp_path)), "--name-separator", "-")
    assert proc.returncode == 2 and "--name-separator" in proc.stderr

"""Real MCP servers for the loop: the npm filesystem server over a folder of logs and the SDK
test server, reached through the catalog and the services pipeline like `llmc ask` does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.model import Tool, ToolCall, ToolResult
from tests.helpers import node_tool, sdk_server


@dataclass
class Toolbox:
    tools: list[Tool]
    call_tool: Callable[[ToolCall], ToolResult]
    logs: Path

    def name(self, api: str, qualified: str) -> str:
        """The name this provider's model uses for server.tool (translate decides it)."""
        from llmc_cli.agent import provider_tool_names
        from llmc_cli.translate import translate

        server, tool = qualified.split(".", 1)
        names = provider_tool_names(translate(self.tools, api))
        return next(n for n, owner in names.items() if owner == (server, tool))

    def tool(self, qualified: str) -> Tool:
        return next(t for t in self.tools if t.qualified_name == qualified)


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One set of servers per test module (starting them per test would triple the run time);
    its own state dir, since the per-test isolation fixture does not reach module scope."""
    from llmc_cli import services
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import Profile
    from llmc_cli.model import ServerSpec

    tmp_path = tmp_path_factory.mktemp("toolbox")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app-2026-11-20.log").write_text("INFO start\nERROR disk quota exceeded\n")
    (logs / "app-2026-11-21.log").write_text("INFO start\nERROR connection reset by peer\nINFO retry ok\n")
    (logs / "notes.txt").write_text("not a log\n")
    specs = [
        ServerSpec("fs", command=(node_tool("mcp-server-filesystem"), str(logs))),
        ServerSpec("sdk", command=tuple(sdk_server("sdk_server.py"))),
    ]
    # --yes: these tests stand for an unattended run that may use every tool of the test servers.
    profile = LoadedProfile("test", None, Profile())
    with pytest.MonkeyPatch.context() as mp, Catalog(specs) as catalog:
        mp.setenv("LLMC_STATE_DIR", str(tmp_path / "state"))
        calls = services.open_calls(catalog, profile, command="ask", caller="model", assume_yes=True)
        tools, failures = catalog.list_tools()
        assert not failures, failures
        yield Toolbox(tools, lambda call: calls.run(services.ToolRequest.of(call)).tool_result, logs)

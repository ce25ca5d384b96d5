"""The workspace server driven through llmc's real client (connect -> ClientSession over the in-memory
transport), plus raw access to the endpoint for protocol tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.mcp.client import connect
from llmc_cli.model import ServerSpec
from llmc_cli.services import builtin_servers

BWRAP = shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
# Process tests run in every sandbox that works here; scripts/test.sh installs bubblewrap as root.
SANDBOXES = ["bwrap", "none"] if BWRAP else ["none"]
COMMANDS = ["sh", "echo", "cat", "sleep", "yes", "ls"]


class Client:
    """tools/call through llmc's ClientSession; each result is checked against the tool's outputSchema."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.tools = {t["name"]: t for t in session.list_tools()}

    def raw(self, tool: str, **args: Any) -> dict[str, Any]:
        return self.session.call_tool(tool, args, timeout=60)

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        result = self.raw(tool, **args)
        assert result.get("isError") is not True, result["content"][0]["text"]
        schema = self.tools[tool].get("outputSchema")
        if schema:
            import jsonschema

            jsonschema.validate(result["structuredContent"], schema)
        return result["structuredContent"]

    def error(self, tool: str, **args: Any) -> str:
        result = self.raw(tool, **args)
        assert result.get("isError") is True, f"expected a tool error, got {result}"
        return result["content"][0]["text"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "secret.txt").write_text("TOP SECRET\n")
    return o


@pytest.fixture
def workspace(root: Path) -> Iterator[Callable[..., Client]]:
    """workspace(**options) -> Client connected to a workspace server rooted at `root`."""
    sessions = []

    def make(**options: Any) -> Client:
        options.setdefault("roots", [str(root)])
        options.setdefault("read_only", False)
        session = connect(ServerSpec(name="ws", builtin="workspace", options=options, timeout=60), builtins=builtin_servers())
        sessions.append(session)
        return Client(session)

    yield make
    for session in sessions:
        session.close()

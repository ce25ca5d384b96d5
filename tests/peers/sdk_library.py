"""An `mcp` SDK server with resources, resource templates and prompts besides two tools, for the
policy tests of resources/read and prompts/get (tests/policy/test_reads.py), and completions of
their arguments (the values listed below that start with the value so far).

Usage: python sdk_library.py   (stdio)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from mcp import types
from mcp.server.mcpserver import MCPServer

# The values completion/complete offers, by argument name (a prompt's or a URI template's).
VALUES = {"topic": ["tides", "tigers", "trees"], "name": ["faq", "readme"], "user": ["alice", "admin"]}


def build() -> MCPServer:
    server = MCPServer(name="llmc-test-library", version="1.0.0")

    @server.tool(description="Search the library.", annotations={"readOnlyHint": True})
    def search(query: str) -> str:
        return f"found {query}"

    @server.tool(description="Delete a document.")
    def delete(name: str) -> str:
        return f"deleted {name}"

    @server.resource("lib://public/readme", description="Open to everyone.")
    def readme() -> str:
        return "public readme"

    @server.resource("lib://private/salaries", description="Confidential.")
    def salaries() -> str:
        return "confidential salaries"

    @server.resource("lib://public/{name}", description="A public document by name.")
    def public(name: str) -> str:
        return f"public document {name}"

    @server.resource("lib://private/{name}", description="A private document by name.")
    def private(name: str) -> str:
        return f"private document {name}"

    @server.prompt(description="Summarize a topic.")
    def summarize(topic: str) -> str:
        return f"Summarize {topic}"

    @server.prompt(description="Log in to the archive.")
    def login(user: str, api_key: str) -> str:
        return f"Log in as {user}"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        values = [v for v in VALUES.get(argument.name, []) if v.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)

    return server


def configure(argv: list[str], exit: Callable[[int], NoReturn] = os._exit, environ: Mapping[str, str] = os.environ) -> MCPServer:
    """The server (no options), for tests/peer_threads.py."""
    return build()


if __name__ == "__main__":
    build().run("stdio")
    sys.exit(0)

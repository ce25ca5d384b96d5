"""An `mcp` SDK server that counts its tool calls, for the result cache tests (tests/cache/):
each call appends one line "TOOL ARGUMENTS" to the file $COUNT_FILE, so a test sees how many
calls reached the server across llmc processes.

search   read-only: "QUERY #N" (N: this process's call number)
delete   destructive; plain: unannotated; fail: read-only, answers isError; big: read-only,
         answers N characters; announce: read-only, sends notifications/tools/list_changed.
$SEARCH_DESCRIPTION, when set, is search's description (a changed tool definition: drift).

Usage: python counting_server.py   (stdio; both eras: an initialize-era client gets
notifications/tools/list_changed without subscribing)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn

from mcp.server.mcpserver import Context, MCPServer

READ_ONLY = {"readOnlyHint": True}


def build(environ: Mapping[str, str] = os.environ) -> MCPServer:
    """The server, with the environment it runs in (its process's)."""
    server = MCPServer(name="llmc-test-counting", version="1.0.0")

    def count(tool: str, **arguments: object) -> int:
        with open(environ["COUNT_FILE"], "a", encoding="utf-8") as f:
            f.write(f"{tool} {json.dumps(arguments, sort_keys=True)}\n")
        with open(environ["COUNT_FILE"], encoding="utf-8") as f:
            return sum(1 for _ in f)

    @server.tool(description=environ.get("SEARCH_DESCRIPTION") or "Search the index.", annotations=READ_ONLY)
    def search(query: str, token: str = "") -> str:
        return f"{query} #{count('search', query=query, token=token)}"

    @server.tool(description="Delete a document.", annotations={"readOnlyHint": False, "destructiveHint": True})
    def delete(name: str) -> str:
        return f"deleted {name} #{count('delete', name=name)}"

    @server.tool(description="Anything, unannotated.")
    def plain(name: str) -> str:
        return f"plain {name} #{count('plain', name=name)}"

    @server.tool(description="Always fails.", annotations=READ_ONLY)
    def fail(name: str) -> str:
        raise RuntimeError(f"failed {name} #{count('fail', name=name)}")

    @server.tool(description="A long answer.", annotations=READ_ONLY)
    def big(size: int) -> str:
        return f"#{count('big', size=size)}" + "x" * size

    @server.tool(description="Announces a changed tool list.", annotations=READ_ONLY)
    async def announce(ctx: Context) -> str:
        await ctx.session.send_tool_list_changed()
        return f"announced #{count('announce')}"

    return server


def configure(argv: list[str], exit: Callable[[int], NoReturn] = os._exit, environ: Mapping[str, str] = os.environ) -> MCPServer:
    """The server (no options) in ENVIRON, for tests/peer_threads.py."""
    return build(environ)


if __name__ == "__main__":
    build().run("stdio")
    sys.exit(0)

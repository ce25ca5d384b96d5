"""A real MCP server (the official `mcp` SDK) whose tool and prompt names are given on the command
line: names with `.`, `_`, `__`, `/` or over 64 characters, as servers really name them.

Usage: python odd_names.py [--prompt NAME]... TOOL...
Each tool answers `TOOL: MESSAGE` (which tool really ran); each prompt `PROMPT: TOPIC`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer


def configure(argv: list[str]) -> MCPServer:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt", action="append", default=[], metavar="NAME")
    parser.add_argument("tools", nargs="*")
    args = parser.parse_args(argv)
    server = MCPServer(name="odd-names", version="1.0.0")

    def tool(name: str) -> Callable[[str], str]:
        def run(message: str = "") -> str:
            return f"{name}: {message}"

        return run

    def prompt(name: str) -> Callable[[str], str]:
        def render(topic: str) -> str:
            return f"{name}: {topic}"

        return render

    for name in args.tools:
        server.tool(name=name, description=f"Answer with the name {name} and the message.")(tool(name))
    for name in args.prompt:
        server.prompt(name=name, description=f"The prompt {name}.")(prompt(name))
    return server


if __name__ == "__main__":
    configure(sys.argv[1:]).run("stdio")

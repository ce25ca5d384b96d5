"""An `mcp` SDK server that says whose it is: `whoami` returns the API_TOKEN it was started with
(the account a profile's `env = { API_TOKEN = "${TOKEN}" }` logs it in as).

Usage: python env_reporter.py   (stdio)
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer


def build() -> MCPServer:
    server = MCPServer(name="env-reporter", version="1.0.0")

    def whoami() -> str:
        return os.environ.get("API_TOKEN", "unset")

    server.add_tool(whoami, name="whoami", description="The API_TOKEN this server was started with.")
    return server


if __name__ == "__main__":
    build().run("stdio")

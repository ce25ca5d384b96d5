"""A real MCP server (official `mcp` SDK, stdio) that quotes secrets back, as careless servers do:
its `login` tool puts the password it was given, and its own API_TOKEN from the environment, into
a JSON-RPC error message (`fail_with` = "rpc"), a tool error, or a result (text, JSON text,
structuredContent, a URL, a key), raw, JSON-escaped and URL-encoded."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError


def quoted(password: str) -> str:
    token = os.environ.get("API_TOKEN", "")
    return (
        f"login failed for password {password} (token {token}); request was "
        f"{json.dumps({'password': password, 'token': token})} "
        f"via https://api.example/login?p={quote(password, safe='')}&t={quote(token, safe='')}"
    )


def build() -> MCPServer:
    server = MCPServer(name="quoting", version="1.0.0")

    @server.tool(description="Log in; every outcome quotes the secrets.")
    def login(user: str, password: str, fail_with: str = "rpc") -> dict[str, Any]:
        text = quoted(password)
        if fail_with == "rpc":
            raise MCPError(code=-32000, message=text, data={"echo": text})
        if fail_with == "tool":
            raise ToolError(text)
        return {
            "said": text,
            "nested": {"deeper": [text, json.dumps({"again": text})]},
            password: "the password as a key",
            os.environ.get("API_TOKEN", "-"): "the token as a key",
        }

    return server


if __name__ == "__main__":
    build().run("stdio")

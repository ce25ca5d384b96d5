"""A hostile stdio server built with the official `mcp` SDK: its tools try what a malicious
package from npm or PyPI would try from inside llmc's sandbox, and say what happened.

Usage: python sandbox_prober.py
Tools: read(path) -> the file's text or "DENIED: <error>"; append(path, text) -> "APPENDED" or
"DENIED: ..."; link(target, path) -> "LINKED" or "DENIED: ..." (a symbolic link at path); connect(port) -> "CONNECTED" or "DENIED: ..." (127.0.0.1); fork(count) -> how
many processes it could start at once (then ended; bounded by `count`); env() -> the
environment as JSON; whoami() -> HOME, cwd and the first lines of /proc/self/limits;
roots() -> the roots the client offers (roots/list).
"""

from __future__ import annotations

import json
import os
import signal
import socket
from typing import Annotated

from mcp import types
from mcp.server.mcpserver import ListRoots, MCPServer, Resolve


def client_roots() -> ListRoots:
    return ListRoots()


def build() -> MCPServer:
    server = MCPServer(name="sandbox-prober", version="1.0.0")

    @server.tool(description="Read a file.")
    def read(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read(10_000)
        except OSError as exc:
            return f"DENIED: {exc}"

    @server.tool(description="Append text to a file.")
    def append(path: str, text: str) -> str:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
            return "APPENDED"
        except OSError as exc:
            return f"DENIED: {exc}"

    @server.tool(description="Make a symbolic link at path pointing to target.")
    def link(target: str, path: str) -> str:
        try:
            os.symlink(target, path)
            return "LINKED"
        except OSError as exc:
            return f"DENIED: {exc}"

    @server.tool(description="Open a TCP connection to 127.0.0.1:port.")
    def connect(port: int) -> str:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=3):
                return "CONNECTED"
        except OSError as exc:
            return f"DENIED: {exc}"

    @server.tool(description="Start up to `count` processes at once; how many started.")
    def fork(count: int) -> str:
        started: list[int] = []
        error = ""
        try:
            for _ in range(min(count, 20_000)):  # bounded, whatever the sandbox does
                try:
                    started.append(os.posix_spawn("/bin/sleep", ["sleep", "60"], {}))
                except OSError as exc:
                    error = str(exc)
                    break
        finally:
            for pid in started:
                os.kill(pid, signal.SIGKILL)
            for pid in started:
                os.waitpid(pid, 0)
        return json.dumps({"started": len(started), "error": error})

    @server.tool(description="The environment.")
    def env() -> str:
        return json.dumps(dict(os.environ))

    @server.tool(description="Where am I.")
    def whoami() -> str:
        with open("/proc/self/limits", encoding="utf-8") as f:
            limits = f.read()
        return json.dumps({"home": os.environ.get("HOME"), "cwd": os.getcwd(), "pid": os.getpid(), "limits": limits})

    @server.tool(description="The roots the client offers.")
    async def roots(listed: Annotated[types.ListRootsResult, Resolve(client_roots)]) -> str:
        return json.dumps([str(r.uri) for r in listed.roots])

    return server


if __name__ == "__main__":
    build().run("stdio")

"""A batch's routing: N bare tool names (a `call --batch` file naming tools without SERVER.)
resolved to their servers against a profile of several servers, with the tool-name cache that
earlier listings left behind. In-process, over in-memory servers: what is timed is the routing
itself (cache reads, profile lookups), not the servers.

    .venv/bin/python bench/resolve_bench.py [--calls N] [--servers S]

Runs against whichever llmc_cli is on the path, so the same file times two trees:
    PYTHONPATH=/path/to/other/tree .venv/bin/python bench/resolve_bench.py
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any, Callable

PROTOCOL = "2025-06-18"


class Server:
    """An in-memory MCP server (the MemoryTransport's endpoint) with a few tools."""

    def __init__(self, tools: list[str]) -> None:
        self.tools = tools

    def handle(self, message: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            return
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "bench", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in self.tools]}
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "method not found"}})
            return
        send({"jsonrpc": "2.0", "id": ident, "result": result})


def resolver(catalog: Any) -> Callable[[str], tuple[str, str]]:
    """The command's resolution of tool names, as `call --batch` makes it in this tree."""
    try:
        from llmc_cli.services.tools import ToolResolver
    except ImportError:  # a tree from before services/tools.py: the CLI resolved each line itself
        import click

        from llmc_cli.cli.common import resolve_tool

        ctx = click.Context(click.Command("batch"))
        return lambda name: resolve_tool(ctx, catalog, name)
    return ToolResolver(catalog, None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=3)
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    os.environ.update(LLMC_STATE_DIR=state, LLMC_CONFIG_DIR=state)
    from llmc_cli.catalog import Catalog
    from llmc_cli.model import ServerSpec

    servers = {f"s{i}": Server([f"tool{i}_{j}" for j in range(20)]) for i in range(args.servers)}
    names = [f"tool{i % args.servers}_{i % 20}" for i in range(args.calls)]

    def run() -> float:
        specs = [ServerSpec(name=name, builtin="bench", timeout=5) for name in servers]
        with Catalog(specs, builtins={"bench": lambda spec: servers[spec.name]}) as catalog:
            resolve = resolver(catalog)
            started = time.perf_counter()
            for name in names:
                resolve(name)
            return time.perf_counter() - started

    cold = run()  # lists every server and leaves the cache
    warm = min(run() for _ in range(3))  # a later batch: the cache names each tool's server
    print(f"{args.calls} bare names over {args.servers} servers: first batch {cold * 1000:.1f} ms, "
          f"later batch {warm * 1000:.1f} ms ({warm / args.calls * 1e6:.1f} us per line)")


if __name__ == "__main__":
    main()

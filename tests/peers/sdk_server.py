"""A real MCP server built with the official `mcp` SDK, for the client tests.

Usage: python sdk_server.py [stdio|sse|streamable-http] [--port N] [--stateless] [--json] [--legacy]
                            [--call-log FILE] [--list-log FILE] [--growing]
Tools cover what the client must handle: text, structured output, tool errors, progress,
logging, elicitation, slow replies, a crash, and state kept per session (remember/recall).
--legacy serves only the initialize era (no `server/discover`): Streamable HTTP with
`Mcp-Session-Id` sessions, the shape whose sessions llmc remembers between invocations.
--call-log appends every tools/call it receives to FILE (a JSON line: tool, arguments) before
running it: what really ran upstream, to compare with llmc's audit trail. --list-log appends a
line for every tools/list it receives. --growing adds `grow(name)`: a new tool NAME (it echoes)
joins the listing, announced by notifications/tools/list_changed, and `touch(uri)`: announces
notifications/resources/updated for URI to the listen streams that watch it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field


class Weather(BaseModel):
    city: str
    celsius: float = Field(description="Temperature in degrees Celsius")


def build(exit: Callable[[int], NoReturn] = os._exit) -> MCPServer:
    """The server with its tools; `exit` ends the process at once (the `crash` tool)."""
    server = MCPServer(name="llmc-test-server", version="1.2.3", instructions="Test server for llmc.")

    @server.tool(description="Echo a message back.")
    def echo(message: str) -> str:
        return message

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Structured weather for a city.")
    def weather(city: str) -> Weather:
        return Weather(city=city, celsius=21.5)

    @server.tool(description="Always fails with a tool error.")
    def fail(reason: str = "boom") -> str:
        raise ValueError(reason)

    @server.tool(description="Sleep, reporting progress.")
    async def slow(seconds: float, ctx: Context) -> str:
        steps = max(1, int(seconds * 10))
        for i in range(steps):
            await ctx.report_progress(i + 1, steps)
            await asyncio.sleep(seconds / steps)
        return f"slept {seconds}"

    @server.tool(description="Log a message to the client, then answer.")
    async def log(message: str, ctx: Context) -> str:
        await ctx.info(message)
        return "logged"

    # Per session: the HTTP session (Mcp-Session-Id), else the process (over stdio, the one
    # connection; the modern era has no sessions, and the SDK gives each request its own).
    notes: dict[str, dict[str, str]] = {}

    def session_key(ctx: Context) -> str:
        return (ctx.headers or {}).get("mcp-session-id") or "process"

    @server.tool(description="Remember a value in this session.")
    def remember(key: str, value: str, ctx: Context) -> str:
        notes.setdefault(session_key(ctx), {})[key] = value
        return f"remembered {key}"

    @server.tool(description="Recall a value remembered earlier in this session.")
    def recall(key: str, ctx: Context) -> str:
        try:
            return notes[session_key(ctx)][key]
        except KeyError:
            raise ToolError(f"nothing remembered under {key!r} in this session") from None

    @server.tool(description="Exit the server process abruptly (crash mid-call).")
    def crash() -> str:
        exit(3)

    @server.tool(description="The W3C trace context the request carried in params._meta (SEP-414).")
    def trace_context(ctx: Context) -> dict[str, str]:
        meta = ctx.request_context.meta or {}
        get = meta.get if isinstance(meta, dict) else lambda key: getattr(meta, key, None)
        return {key: value for key in ("traceparent", "tracestate", "baggage") if isinstance(value := get(key), str)}

    @server.resource("test://greeting", description="A greeting resource.")
    def greeting() -> str:
        return "hello from a resource"

    @server.prompt(description="Review some code.")
    def review(code: str) -> str:
        return f"Please review:\n{code}"

    return server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "sse", "streamable-http"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true", help="JSON replies instead of SSE")
    parser.add_argument("--legacy", action="store_true", help="no server/discover: initialize-era clients only")
    parser.add_argument(
        "--slow-discover",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="answer the first server/discover this late (a slow start, as on a loaded machine)",
    )
    parser.add_argument("--call-log", metavar="FILE", help="append every tools/call received to FILE")
    parser.add_argument("--list-log", metavar="FILE", help="append a line for every tools/list received to FILE")
    parser.add_argument("--growing", action="store_true", help="add `grow`: it adds a tool and announces list_changed")
    parser.add_argument("--rendezvous", action="store_true", help="add the `meet` tool (a proof of concurrency)")
    parser.add_argument("--dotted-tool", action="store_true", help="add `notes.get`: a tool name with a dot in it")
    return parser


def configure(argv: list[str], exit: Callable[[int], NoReturn] = os._exit, environ: Mapping[str, str] = os.environ) -> MCPServer:
    """The server the command line ARGV asks for (its transport aside). `exit` ends the process at
    once; tests/peer_threads.py serves it in a thread of the test process, main() in its own."""
    args = _parser().parse_args(argv)
    server = build(exit)
    if args.rendezvous:
        from pathlib import Path
        from uuid import uuid4

        @server.tool(
            description="Wait until `count` calls, from any process, are inside this tool at once "
            "(each leaves a mark in the directory `place`)."
        )
        async def meet(place: str, count: int, timeout: float = 60.0) -> str:
            (Path(place) / f"{os.getpid()}-{uuid4().hex}").touch()
            for _ in range(int(timeout / 0.02)):  # bounded: "alone" once the timeout has passed
                if sum(1 for _ in Path(place).iterdir()) >= count:
                    return "met"
                await asyncio.sleep(0.02)
            return "alone"

    if args.dotted_tool:

        @server.tool(name="notes.get", description="A tool whose name holds a dot.")
        def notes_get(key: str) -> str:
            return f"note {key}"

    if args.growing:

        @server.tool(description="Add a tool named NAME (it echoes its message) and announce the change.")
        async def grow(name: str, ctx: Context) -> str:
            def grown(message: str) -> str:
                return f"{name}: {message}"

            server.add_tool(grown, name=name, description=f"Added by grow({name!r}).")
            await ctx.notify_tools_changed()  # to subscriptions/listen streams (2026-07-28)
            await ctx.session.send_tool_list_changed()  # to an initialize-era client, unasked
            return f"added {name}"

        @server.tool(description="Announce that the resource at URI changed.")
        async def touch(uri: str, ctx: Context) -> str:
            await ctx.notify_resource_updated(uri)  # to subscriptions/listen streams that watch it (2026-07-28)
            return f"touched {uri}"

    handlers = server._lowlevel_server._request_handlers  # the SDK exposes no switch for these
    if args.list_log:
        listed = handlers["tools/list"]

        async def logged_list(ctx, params):  # type: ignore[no-untyped-def]
            with open(args.list_log, "a", encoding="utf-8") as fh:
                fh.write("tools/list\n")
            return await listed.handler(ctx, params)

        handlers["tools/list"] = type(listed)(listed.params_type, logged_list)
    if args.call_log:
        import json

        call = handlers["tools/call"]

        async def logged_call(ctx, params):  # type: ignore[no-untyped-def]
            line = json.dumps({"tool": params.name, "arguments": params.arguments or {}}) + "\n"
            with open(args.call_log, "a", encoding="utf-8") as fh:  # one append per line: writers do not interleave
                fh.write(line)
            return await call.handler(ctx, params)

        handlers["tools/call"] = type(call)(call.params_type, logged_call)
    if args.legacy:
        handlers.pop("server/discover")  # discover is then "method not found"
    elif args.slow_discover:
        entry = handlers["server/discover"]
        first = [True]

        async def slow_discover(ctx, params):  # type: ignore[no-untyped-def]
            if first.pop() if first else False:
                await asyncio.sleep(args.slow_discover)
            return await entry.handler(ctx, params)

        handlers["server/discover"] = type(entry)(entry.params_type, slow_discover)
    return server


def main() -> None:
    args = _parser().parse_args()
    server = configure(sys.argv[1:])
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    if args.transport == "sse":
        app = server.sse_app()
    else:
        app = server.streamable_http_app(stateless_http=args.stateless, json_response=args.json)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", http="h11")


if __name__ == "__main__":
    sys.exit(main())

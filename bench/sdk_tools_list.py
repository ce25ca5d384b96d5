"""Peer (b): the official `mcp` SDK client listing a stdio server's tools."""

import json
import sys

import anyio

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print(json.dumps([t.model_dump(mode="json") for t in tools.tools]))


anyio.run(main)

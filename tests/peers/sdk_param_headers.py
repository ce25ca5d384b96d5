"""A 2026-07-28 Streamable HTTP server (official `mcp` SDK) whose tool mirrors parameters into
`Mcp-Param-*` headers (`x-mcp-header`); the SDK rejects a call whose headers do not match.

Usage: python sdk_param_headers.py --port N
"""

from __future__ import annotations

import argparse
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field


def build() -> MCPServer:
    server = MCPServer(name="param-headers")

    @server.tool(description="Run a query in a region (region and dry_run mirrored into headers).")
    def run_query(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
        query: str,
        dry_run: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Dry-Run"})] = False,
    ) -> str:
        return f"{region}: {query}{' (dry run)' if dry_run else ''}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(build().streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning", http="h11")


if __name__ == "__main__":
    main()

"""Capture real servers' tools/list output with the `mcp` SDK's own client over stdio.

    .venv/bin/python -m tests.translate.capture     # rewrites tests/data/manifests/{everything,filesystem}.json

The golden tests translate these stored manifests, and re-capture them live to notice when an
npm package update changes its tools (then re-run this script and review the golden diff)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"
MANIFESTS = ROOT / "tests" / "data" / "manifests"
ALLOWED_DIR = "/tmp/llmc-capture"  # server-filesystem's allowed directory (the tool list does not name it)


def servers() -> dict[str, list[str]]:
    return {
        "everything": [str(NODE_BIN / "mcp-server-everything")],
        "filesystem": [str(NODE_BIN / "mcp-server-filesystem"), ALLOWED_DIR],
    }


def capture(argv: list[str], timeout: float = 60) -> dict[str, Any]:
    """{"server", "version", "tools"}: every page of tools/list, as the server sent each tool."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env={"PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    )

    async def run() -> dict[str, Any]:
        with anyio.fail_after(timeout), tempfile.TemporaryFile("w+") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                tools: list[dict[str, Any]] = []
                cursor = None
                for _ in range(100):  # pages; a server that never stops paging is cut off
                    page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                    tools += [t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                return {"server": init.server_info.name, "version": init.server_info.version, "tools": tools}

    return anyio.run(run)


def main() -> None:
    os.makedirs(ALLOWED_DIR, exist_ok=True)
    MANIFESTS.mkdir(parents=True, exist_ok=True)
    for name, argv in servers().items():
        manifest = capture(argv)
        (MANIFESTS / f"{name}.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {manifest['server']} {manifest['version']}, {len(manifest['tools'])} tools", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A naive file server built with the official `mcp` SDK: it trusts its arguments completely
(any path, relative ones at its own working directory), as many real servers do. Only llmc's
policy stands between a model and the whole disk, so the policy tests can see what got through.

Every access is written to the journal named by $NAIVE_JOURNAL *before* it happens, one line
each ("read PATH", "write PATH", "start LABEL", "end LABEL"): an empty journal proves the
server was never asked to touch anything.

Usage: python naive_files.py   (stdio)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def journal(line: str) -> None:
    with open(os.environ["NAIVE_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def build() -> MCPServer:
    server = MCPServer(name="naive-files", version="1.0.0")

    @server.tool(description="Read a text file.", annotations=READ_ONLY)
    def read(path: str) -> str:
        journal(f"read {path}")
        return Path(path).read_text(encoding="utf-8")

    @server.tool(description="Read several text files.", annotations=READ_ONLY)
    def read_many(paths: list[str]) -> str:
        for path in paths:
            journal(f"read {path}")
        return "\n".join(Path(p).read_text(encoding="utf-8") for p in paths)

    @server.tool(description="Write a text file.")
    def write(path: str, content: str) -> str:
        journal(f"write {path}")
        Path(path).write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters"

    @server.tool(
        description="Journal a start, wait (bounded) until `expect` calls have started, "
        "journal the end: concurrent calls overlap in the journal, sequential "
        "ones do not.",
        annotations=READ_ONLY,
    )
    def stamp(label: str, expect: int = 2, wait: float = 3.0) -> str:
        journal(f"start {label}")
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            started = Path(os.environ["NAIVE_JOURNAL"]).read_text(encoding="utf-8").count("start ")
            if started >= expect:
                break
            time.sleep(0.02)
        journal(f"end {label}")
        return label

    return server


if __name__ == "__main__":
    build().run("stdio")

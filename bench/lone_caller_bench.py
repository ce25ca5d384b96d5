"""Instructions or thread CPU of a lone caller's requests: ClientSession.call_tool over stdio on a
worker thread (the batch worker's path: pump reads its own reply), then ToolResult.from_mcp.

    PYTHONPATH=TREE .venv/bin/python bench/lone_caller_bench.py N   (prints thread CPU us a call)

Under callgrind, (N=1300 - N=300)/1000 of the whole process's instructions is what a request
costs (the server, tests/node's mcp-server-everything, is not traced: --trace-children=no).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.stdio import StdioTransport
from llmc_cli.model import ToolResult

SERVER = str(Path(__file__).resolve().parent.parent / "tests/node/node_modules/.bin/mcp-server-everything")
WARMUP = 200


def main() -> None:
    calls = int(sys.argv[1])
    seconds: list[float] = []

    def run() -> None:  # not the main thread: pump reads only on another
        with ClientSession(StdioTransport([SERVER]), name="everything") as session:
            session.initialize("2025-06-18")
            for i in range(WARMUP):
                ToolResult.from_mcp(session.call_tool("echo", {"message": str(i)}))
            started = time.thread_time()
            for i in range(calls):
                ToolResult.from_mcp(session.call_tool("echo", {"message": str(i)}))
            seconds.append(time.thread_time() - started)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    print(f"{seconds[0] / calls * 1e6:.1f}")


if __name__ == "__main__":
    main()

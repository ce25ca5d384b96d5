"""A stdio tools/call round trip in process, as a batch's worker makes it: ClientSession.call_tool
over StdioTransport against a minimal echo server (a Python loop answering each line), on a worker
thread like the batch's (the main thread never pumps). The client's part only, for instruction
counts independent of the load, the difference of two callgrind runs (the server untraced):

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind --trace-children=no python bench/roundtrip_instructions.py 0
    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind --trace-children=no python bench/roundtrip_instructions.py 2000

(Collected of the second minus the first) / 2000 = instructions a round trip, every thread of the
client (the caller, the stdio reader thread). Without valgrind it prints the process CPU a call."""

import sys
import threading
import time

from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.stdio import StdioTransport

SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m:
        text = m["params"]["arguments"]["message"] if m.get("method") == "tools/call" else ""
        r = {"result": {"content": [{"type": "text", "text": "Echo: " + text}]}, "jsonrpc": "2.0", "id": m["id"]}
        sys.stdout.write(json.dumps(r, separators=(",", ":")) + "\n")
        sys.stdout.flush()
"""

N = int(sys.argv[1])


def run() -> None:
    s = ClientSession(StdioTransport([sys.executable, "-c", SERVER]), name="echo")
    s.adopt("legacy", "2025-06-18")
    for i in range(200):
        s.call_tool("echo", {"message": str(i)})
    t0 = time.process_time()
    for i in range(N):
        s.call_tool("echo", {"message": str(i)})
    if N:
        print(f"{(time.process_time() - t0) / N * 1e6:.1f} us CPU a call", file=sys.stderr)
    s.close()


worker = threading.Thread(target=run)
worker.start()
worker.join()

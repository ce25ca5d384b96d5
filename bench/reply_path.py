"""Where a stdio call's time goes on llmc's side: the same N sequential tools/call round trips to
an instant in-process-free echo server (a few lines of Python answering each line at once), made

  1. by a stdlib loop that reads the pipe itself (no thread switch),
  2. by a stdlib loop whose reader thread hands each reply to the caller through an Event
     (the switch a reader thread costs, and nothing else),
  3. by llmc's ClientSession.call_tool over StdioTransport (the engine: matcher, reader thread, JSON).

    .venv/bin/python bench/reply_path.py [--calls 3000] [--rounds 3]

(2) - (1) is what handing a reply across threads costs; (3) - (2) is the session's own work.
Rounds alternate, and each prints microseconds per call; compare within a round.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

ECHO = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "echo", "version": "0"}}
    else:
        r = {"content": [{"type": "text", "text": json.dumps(m["params"].get("arguments"))}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"""
SERVER = [sys.executable, "-c", ECHO]
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}}


def call(i: int) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"message": str(i)}}}) + "\n").encode()


def direct(n: int) -> float:
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    started = time.perf_counter()
    for i in range(1, n + 1):
        proc.stdin.write(call(i))
        proc.stdin.flush()
        while json.loads(proc.stdout.readline()).get("id") != i:
            pass
    elapsed = time.perf_counter() - started
    proc.kill()
    return elapsed


def handed_over(n: int) -> float:
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    waiting: dict[int, tuple[threading.Event, list[dict[str, object]]]] = {}
    lock = threading.Lock()

    def reader() -> None:
        for line in iter(proc.stdout.readline, b""):  # type: ignore[union-attr]
            message = json.loads(line)
            with lock:
                slot = waiting.pop(message.get("id"), None)
            if slot is not None:
                slot[1].append(message)
                slot[0].set()

    threading.Thread(target=reader, daemon=True).start()

    def round_trip(i: int, data: bytes) -> None:
        slot: tuple[threading.Event, list[dict[str, object]]] = (threading.Event(), [])
        with lock:
            waiting[i] = slot
        proc.stdin.write(data)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        slot[0].wait(10)

    round_trip(0, (json.dumps(INIT) + "\n").encode())
    started = time.perf_counter()
    for i in range(1, n + 1):
        round_trip(i, call(i))
    elapsed = time.perf_counter() - started
    proc.kill()
    return elapsed


def session(n: int) -> float:
    from llmc_cli.mcp.session import ClientSession
    from llmc_cli.mcp.transports.stdio import StdioTransport

    with ClientSession(StdioTransport(SERVER), name="echo") as client:
        client.initialize()
        started = time.perf_counter()
        for i in range(1, n + 1):
            client.call_tool("echo", {"message": str(i)})
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.calls
    for _ in range(args.rounds):
        a, b, c = (run(n) * 1e6 / n for run in (direct, handed_over, session))
        print(f"{n} calls, us per call: pipe read by the caller {a:.0f}, handed over by a reader thread {b:.0f} "
              f"(switch {b - a:+.0f}), llmc Session {c:.0f} (session's own work {c - b:+.0f})")


if __name__ == "__main__":
    main()

"""Which HTTP server the gateway should sit on, by what the server alone costs: the same trivial
MCP endpoint (a POST of a JSON-RPC tools/call answered with a fixed JSON result, no upstream,
no policy, no audit) served by

- uvicorn-httptools / uvicorn-h11: an ASGI app on uvicorn (the mcp SDK's server stack), one
  event loop; the gateway serves on uvicorn-httptools since #38 (the standard library server it
  was measured against, in bench/RESULTS.md, is gone);
- granian-asgi / granian-rsgi: the same app on granian (Rust HTTP, Python callbacks), when its
  package is importable (PYTHONPATH).

Each one in its own process, driven by the gateway bench's client (gateway_bench.py: keep-alive
HTTP/1.1, 16 clients), alternating rounds; reports requests/s, server CPU per request and the
sequential round trip.

    .venv/bin/python bench/http_server_choice.py [--rounds 3] [--calls 3200] [--clients 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # noqa: E402 - the bench's own helpers, beside this file

REPLY = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}], "isError": False}})

SERVERS = {
    "uvicorn-httptools": "UVICORN:httptools",
    "uvicorn-h11": "UVICORN:h11",
    "granian-asgi": "GRANIAN:asgi",
    "granian-rsgi": "GRANIAN:rsgi",
}

ASGI_APP = """
import json

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = json.loads(body)
    reply = json.loads(REPLY)
    reply["id"] = message.get("id")
    data = json.dumps(reply).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
"""

RSGI_APP = """
import json

class App:
    async def __rsgi__(self, scope, proto):
        body = await proto()
        message = json.loads(body)
        reply = json.loads(REPLY)
        reply["id"] = message.get("id")
        proto.response_bytes(200, [("content-type", "application/json")], json.dumps(reply).encode())

app = App()
"""


def start(name: str, port: int, where: Path) -> subprocess.Popen[bytes]:
    spec = SERVERS[name]
    head = f"REPLY = {REPLY!r}\nPORT = {port}\n"
    if spec.startswith("UVICORN:"):
        (where / "asgi_app.py").write_text(head + ASGI_APP)
        code = f"import uvicorn\nuvicorn.run('asgi_app:app', host='127.0.0.1', port={port}, http='{spec[8:]}', log_level='warning', access_log=False)\n"
    elif spec.startswith("GRANIAN:"):
        interface = spec[8:]
        (where / "granian_app.py").write_text(head + (RSGI_APP if interface == "rsgi" else ASGI_APP))
        code = (
            "from granian import Granian\nfrom granian.constants import Interfaces\n"
            f"Granian('granian_app:app', address='127.0.0.1', port={port}, interface=Interfaces.{interface.upper()}, "
            "workers=1, log_enabled=False).serve()\n"
        )
    else:
        code = head + spec
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), os.environ.get("PYTHONPATH", ""), str(gb.ROOT)])}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {proc.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]
        try:
            gb.sequential(port, "echo", 1)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{name} did not come up")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3200)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    import tempfile

    names = [n for n in SERVERS if not n.startswith("granian") or _has("granian")]
    with tempfile.TemporaryDirectory() as tmp:
        procs: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
        try:
            for name in names:
                port = gb.free_port()
                procs[name] = (port, start(name, port, Path(tmp)))
                gb.sequential(port, "echo", 200)  # warm
            seen: dict[str, dict[str, list[float]]] = {n: {"rate": [], "cpu": [], "seq": []} for n in names}
            for round_ in range(args.rounds):
                for name in names if round_ % 2 == 0 else list(reversed(names)):
                    port, proc = procs[name]
                    before = tree_cpu(proc.pid)
                    rate, errors = gb.concurrent(port, "echo", args.clients, args.calls)
                    seen[name]["cpu"].append((tree_cpu(proc.pid) - before) / args.calls * 1e6)
                    seen[name]["rate"].append(rate)
                    seen[name]["seq"].append(statistics.median(gb.sequential(port, "echo", 300)) * 1e6)
                    if errors:
                        print(f"{name}: {len(errors)} failed, e.g. {errors[0]}")
            base = statistics.median(seen["uvicorn-httptools"]["rate"])
            print(f"{args.clients} clients, {args.calls} requests per round, medians of {args.rounds} rounds")
            print("| server | requests/s | vs uvicorn-httptools | server CPU per request | sequential round trip |")
            print("|---|---|---|---|---|")
            for name in names:
                rate = statistics.median(seen[name]["rate"])
                print(
                    f"| {name} | {rate:.0f} | {rate / base:.2f}x | {statistics.median(seen[name]['cpu']):.0f} µs "
                    f"| {statistics.median(seen[name]['seq']):.0f} µs |"
                )
        finally:
            for _, proc in procs.values():
                proc.terminate()
                proc.wait(10)


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (granian serves from worker processes)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            total += gb.cpu_seconds(current)
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return total


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()

"""Where a sequential call's time goes across the in-process gateway's threads: the CPU per call
of each thread (the uvicorn event loop, the request workers, the upstream's stdio readers, the
audit flusher; the client is this process's main thread) and the wall time of the two hand-offs
between the event loop and a worker (WorkPool.submit -> Exchange.serve; Outbox.put -> the loop's
Replies.put; Outbox.put -> the reply's write, protocol.Held.flush). Same setup as bench/gateway_stages.py (server-everything on stdio behind a policy,
audit on, initialize-era calls); compare trees in one run.

    .venv/bin/python bench/gateway_threads.py [--calls 1500] [--tree DIR]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--tree", default=str(HERE.parent))
    args = parser.parse_args()
    sys.path[:0] = [str(Path(args.tree).resolve()), str(HERE.parent), str(HERE)]
    import gateway_bench as gb

    tmp = tempfile.mkdtemp()
    os.environ.update(LLMC_CONFIG_DIR=f"{tmp}/config", LLMC_STATE_DIR=f"{tmp}/state")
    profile = Path(tmp) / "bench.toml"
    profile.write_text(f"[servers.up]\n{gb.STDIO_UP}{gb.POLICY}")
    import llmc_cli
    from llmc_cli.gateway import asgi, exchange, protocol, workpool
    from tests.gateway.inprocess import serve_in_process

    submitted, put = [0.0], [0.0]
    to_worker: list[float] = []
    to_loop: list[float] = []
    to_wire: list[float] = []  # Outbox.put -> the reply's write (protocol.Held.flush)

    def wrap(owner: Any, name: str, before: Any) -> None:
        original = getattr(owner, name)

        def wrapped(*a: Any) -> Any:
            before()
            return original(*a)

        setattr(owner, name, wrapped)

    wrap(workpool.WorkPool, "submit", lambda: submitted.__setitem__(0, time.perf_counter()))
    wrap(exchange.Exchange, "serve", lambda: to_worker.append(time.perf_counter() - submitted[0]))
    wrap(asgi.Outbox, "put", lambda: put.__setitem__(0, time.perf_counter()))
    wrap(asgi.Replies, "put", lambda: to_loop.append(time.perf_counter() - put[0]))
    wrap(protocol.Held, "flush", lambda: to_wire.append(time.perf_counter() - put[0]))
    gateway = serve_in_process(profile, idle_seconds=3600)
    caller = gb.Caller(gateway.running.port, "up.echo")
    for _ in range(300):  # warm: the upstream, the session, every cache
        caller.call()

    def cpu() -> collections.Counter[str]:
        spent: collections.Counter[str] = collections.Counter()
        for thread in threading.enumerate():
            kind = "-".join(thread.name.split("-")[:2])
            try:
                spent[kind] += time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
            except OSError:  # ended meanwhile
                pass
        return spent

    to_worker.clear()
    to_loop.clear()
    to_wire.clear()
    load = os.getloadavg()
    before = cpu()
    started = time.perf_counter()
    for _ in range(args.calls):
        caller.call()
    wall = time.perf_counter() - started
    after = cpu()

    def q(xs: list[float], p: float) -> float:
        return sorted(xs)[int(len(xs) * p)] * 1e6

    print(f"{llmc_cli.__file__}; load {load} -> {os.getloadavg()}; {args.calls} sequential calls; wall {wall / args.calls * 1e6:.0f} µs/call")
    print(f"hand-off loop -> worker p10/p50/p90 {q(to_worker, .1):.0f}/{q(to_worker, .5):.0f}/{q(to_worker, .9):.0f} µs; "
          f"worker -> loop {q(to_loop, .1):.0f}/{q(to_loop, .5):.0f}/{q(to_loop, .9):.0f} µs; "
          f"worker -> reply written {q(to_wire, .1):.0f}/{q(to_wire, .5):.0f}/{q(to_wire, .9):.0f} µs")
    print("| thread | CPU/call |\n|---|---|")
    for kind in sorted(after, key=lambda k: before.get(k, 0) - after[k]):
        spent = (after[kind] - before.get(kind, 0)) / args.calls * 1e6
        if spent >= 1:
            print(f"| {kind}{' (client)' if kind == 'MainThread' else ''} | {spent:.0f} µs |")
    gb.close_session(caller)
    gateway.close()
    os._exit(0)  # the upstream's reader threads: not joined


if __name__ == "__main__":
    main()

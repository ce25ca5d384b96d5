"""Where a sequential call's CPU goes inside the gateway, stage by stage: the HTTP gateway served
in this process (tests/gateway/inprocess.py: uvicorn on a thread, the same core and upstreams),
server-everything on stdio behind a policy (default deny, `up.echo` allowed, read-only), audit
on; N sequential initialize-era calls from bench/gateway_bench.py's client, and for each stage
the CPU time (time.thread_time) of the thread that runs it, summed per call. The stages nest
(serve > handle > ToolCalls.call > Pipeline.run > authorize, decide, execute...). The client
and the gateway share this process and its GIL: absolute numbers run high; compare trees in
one run.

    .venv/bin/python bench/gateway_stages.py [--calls 2000] [--no-fsync] [--tree DIR]

--tree DIR: the `llmc_cli` of DIR (e.g. `git archive COMMIT llmc_cli | tar -x -C DIR`) instead
of this checkout's. --no-fsync: os.fsync and os.fdatasync made no-ops (the audit's Python alone).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (module, attribute path, label): the stages, outermost first
STAGES = [
    ("llmc_cli.gateway.exchange", "Exchange.serve", "worker: the whole request"),
    ("llmc_cli.gateway.http", "Handler._admit_to_endpoint", "  door: Host/Origin, principal, admission"),
    ("llmc_cli.gateway.http", "Handler._read_message", "  JSON body parsed"),
    ("llmc_cli.gateway.http", "Handler._connection_for", "  session found"),
    ("llmc_cli.gateway.replies", "ReplyWriter._send", "  reply: JSON, head, handed to the loop"),
    ("llmc_cli.gateway.connection", "GatewayConnection.handle", "  the MCP connection's request"),
    ("llmc_cli.gateway.tool_calls", "ToolCalls.call", "    the host's tools/call"),
    ("llmc_cli.services.pipeline", "Pipeline.run", "      the pipeline"),
    ("llmc_cli.services.pipeline", "Pipeline.authorize", "        policy decision"),
    ("llmc_cli.services.pipeline", "Pipeline.decide", "        audit decision record (fsync)"),
    ("llmc_cli.services.pipeline", "Pipeline._produce", "        upstream call, inspection, result hash"),
    ("llmc_cli.services.pipeline", "Pipeline._record", "        outcome record (queued)"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--tree", default=str(HERE.parent))
    args = parser.parse_args()
    sys.path[:0] = [str(Path(args.tree).resolve()), str(HERE.parent), str(HERE)]
    import importlib

    import gateway_bench as gb

    tmp = tempfile.mkdtemp()
    os.environ.update(LLMC_CONFIG_DIR=f"{tmp}/config", LLMC_STATE_DIR=f"{tmp}/state")
    profile = Path(tmp) / "bench.toml"
    profile.write_text(f"[servers.up]\n{gb.STDIO_UP}{gb.POLICY}")
    import llmc_cli
    from tests.gateway.inprocess import serve_in_process

    if args.no_fsync:
        os.fsync = os.fdatasync = lambda fd: None  # audit/log.py's data_sync looks fdatasync up per call
    spent: collections.Counter[str] = collections.Counter()
    timing = [False]

    def timed(original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def stage(*a: Any, **k: Any) -> Any:
            if not timing[0]:
                return original(*a, **k)
            started = time.thread_time_ns()
            try:
                return original(*a, **k)
            finally:
                spent[label] += time.thread_time_ns() - started

        return stage

    for module_name, path, label in STAGES:
        owner: Any = importlib.import_module(module_name)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        setattr(owner, name, timed(getattr(owner, name), label))
    gateway = serve_in_process(profile, idle_seconds=3600)
    caller = gb.Caller(gateway.running.port, "up.echo")
    for _ in range(300):  # warm: the upstream, the session, every cache
        caller.call()
    load = os.getloadavg()
    timing[0] = True
    started = time.perf_counter()
    for _ in range(args.calls):
        caller.call()
    wall = time.perf_counter() - started
    timing[0] = False
    print(f"{llmc_cli.__file__}; load {load} -> {os.getloadavg()}; {args.calls} sequential calls"
          f"{', fsync a no-op' if args.no_fsync else ''}; wall {wall / args.calls * 1e6:.0f} µs/call")
    print("| stage | CPU/call |\n|---|---|")
    for _, _, label in STAGES:
        depth = (len(label) - len(label.lstrip())) // 2
        print(f"| {'> ' * depth}{label.strip()} | {spent[label] / args.calls / 1000:.0f} µs |")
    gb.close_session(caller)
    gateway.close()
    os._exit(0)  # the upstream's reader threads: not joined


if __name__ == "__main__":
    main()

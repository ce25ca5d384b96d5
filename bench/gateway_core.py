"""The gateway's core alone, in this process, no HTTP: what one tools/call costs below the HTTP
layer (gateway/connection.py, the services pipeline with policy and audit, the upstream session).

    .venv/bin/python bench/gateway_core.py [--calls 1500] [--rounds 3] [--profile]

The upstream is server-everything over stdio (tests/node/node_modules), behind a profile with a
policy (default deny, `up.echo` allowed and marked read-only). Each call is a 2026-07-28
tools/call handed to a fresh GatewayConnection (as the HTTP side does per request) and run on
the calling thread (McpServer.inline_calls): the thread's own user and system CPU per call is the
core's cost, whatever the machine's load does to wall time. Rows, alternating per round: the
audit as served (decision records fsync'd before each call, outcomes deferred), the same with
fsync and fdatasync made no-ops (what the audit's Python costs beside the disk), and no audit at all (the
pipeline's sink replaced by one that writes nothing: the audit's whole share). `--profile`
prints a cProfile of the first row, timed by thread CPU.
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


class NoAudit:
    def record(self, record: Any, *, before_action: bool) -> None:
        pass

    def record_before_actions(self, records: Any) -> None:
        pass

    def flush(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    os.environ.update(LLMC_CONFIG_DIR=f"{tmp}/config", LLMC_STATE_DIR=f"{tmp}/state")
    profile = Path(tmp) / "bench.toml"
    profile.write_text(f'[servers.up]\ncommand = "{EVERYTHING}"\nargs = ["stdio"]\n\n[policy]\ndefault = "deny"\n'
                       'allow = ["up.echo"]\ndeny = ["up.get-env"]\n\n[policy.hints."up.echo"]\nreadOnly = true\n')
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway.connection import GatewayConnection
    from llmc_cli.gateway.toolbox import Toolbox

    toolbox = Toolbox(load_profile(str(profile)))
    toolbox.catalog.pool.warm_up()
    audit, real_fsync, real_fdatasync = toolbox.audit, os.fsync, os.fdatasync

    def call(i: int) -> None:
        connection = GatewayConnection(toolbox, transport="http")
        connection.inline_calls = True
        replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        connection.handle({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "up.echo", "arguments": {"message": "hi"}, "_meta": META}}, replies.put)
        reply = replies.get(timeout=30)
        assert "result" in reply and not reply["result"].get("isError"), reply
        connection.close()

    rows: dict[str, list[tuple[float, float, float]]] = {"audit on": [], "audit on, fsync a no-op": [], "no audit": []}
    for i in range(100):
        call(i)
    for round_ in range(args.rounds):
        for name in rows:
            toolbox.audit = NoAudit() if name == "no audit" else audit  # type: ignore[assignment]
            os.fsync = (lambda fd: None) if "no-op" in name else real_fsync  # the log syncs with fdatasync
            os.fdatasync = (lambda fd: None) if "no-op" in name else real_fdatasync
            profiler = None
            if args.profile and round_ == 0 and name == "audit on":
                import cProfile

                profiler = cProfile.Profile(time.thread_time)
                profiler.enable()
            before, started = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
            for i in range(args.calls):
                call(i)
            after, wall = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter() - started
            os.fsync, os.fdatasync = real_fsync, real_fdatasync
            if profiler is not None:
                import pstats

                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
            rows[name].append(((after.ru_utime - before.ru_utime) / args.calls, (after.ru_stime - before.ru_stime) / args.calls,
                               wall / args.calls))
    toolbox.audit = audit
    print(f"load {os.getloadavg()}; {args.calls} sequential calls per row and round, {args.rounds} rounds (medians)")
    print("| core, in process | user CPU/call | system CPU/call | wall/call |")
    print("|---|---|---|---|")
    for name, seen in rows.items():
        user, system, wall = (statistics.median(s[k] for s in seen) * 1e6 for k in range(3))
        print(f"| {name} | {user:.0f} µs | {system:.0f} µs | {wall:.0f} µs |")
    toolbox.close()
    sys.exit(0)


if __name__ == "__main__":
    main()

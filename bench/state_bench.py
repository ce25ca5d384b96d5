"""The file store against PostgreSQL, in one run: audit appends per second (N single-record
appends, what `llmc call` does: one transaction or one fsync each, and N records through a
batch's Deferred trail) and gateway tools/call per second (`llmc serve --http` in front of the
SDK test server over stateless Streamable HTTP, one keep-alive client calling in turn, then
several at once; bench/gateway_bench.py's client), once with each store.

    .venv/bin/python bench/state_bench.py [--records N] [--calls N] [--clients N] [--json]

PostgreSQL: LLMC_STATE_URL (migrated; PGPASSWORD in the environment), else a throwaway cluster
started like the tests do (Debian's postgresql package) — that one runs with fsync=off, so its
numbers flatter PostgreSQL against the file store (which fsyncs): give LLMC_STATE_URL of a real
database for a fair comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rate(log: Any, records: int, deferred: bool) -> float:
    from llmc_cli.audit import Deferred

    started = time.perf_counter()
    if deferred:
        with Deferred(log) as trail:
            for i in range(records):
                trail.record({"event": "outcome", "n": i}, before_action=i % 2 == 0)
    else:
        for i in range(records):
            log.append({"event": "outcome", "n": i})
    return records / (time.perf_counter() - started)


def gateway_rates(url: str | None, calls: int, clients: int) -> tuple[float, float]:
    """(sequential calls/s, concurrent calls/s) through a gateway whose state is in files (url
    None) or in the database `url`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gateway_bench import concurrent, sequential, upstream_and_gateway

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LLMC_CONFIG_DIR": f"{tmp}/config", "LLMC_STATE_DIR": f"{tmp}/state",
               "LLMC_STATE_URL": url or ""}
        with upstream_and_gateway(tmp, env) as (_, gw_port, _gateway):
            latencies = sequential(gw_port, "up.echo", calls)
            in_turn = len(latencies) / sum(latencies)
            at_once, errors = concurrent(gw_port, "up.echo", clients, calls)
            if errors:
                sys.exit(f"{len(errors)} gateway calls failed: {sorted(set(errors))[:3]}")
            return in_turn, at_once


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--calls", type=int, default=200, help="gateway calls per measurement")
    parser.add_argument("--clients", type=int, default=8, help="concurrent gateway clients")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from llmc_cli.audit import AuditLog, PostgresAuditLog
    from llmc_cli.store.postgres import Database

    server = None
    url = os.environ.get("LLMC_STATE_URL")
    if not url:
        from tests.state.postgres import PASSWORD, PostgresServer

        server = PostgresServer()
        os.environ["PGPASSWORD"] = PASSWORD
        url = server.create_database("bench")
    try:
        Database.for_url(url).migrate()
        with tempfile.TemporaryDirectory() as tmp:
            results = {
                "file appends/s": rate(AuditLog(Path(tmp) / "a.jsonl"), args.records, False),
                "file batch records/s": rate(AuditLog(Path(tmp) / "b.jsonl"), args.records, True),
                "postgres appends/s": rate(PostgresAuditLog(url), args.records, False),
                "postgres batch records/s": rate(PostgresAuditLog(url), args.records, True),
            }
        for store, store_url in (("file", None), ("postgres", url)):
            in_turn, at_once = gateway_rates(store_url, args.calls, args.clients)
            results[f"{store} gateway calls/s (1 client)"] = in_turn
            results[f"{store} gateway calls/s ({args.clients} clients)"] = at_once
    finally:
        if server is not None:
            server.close()
    if args.json:
        print(json.dumps({k: round(v, 1) for k, v in results.items()}))
    else:
        for name, value in results.items():
            print(f"{name:36} {value:10.1f}")


if __name__ == "__main__":
    main()

"""Translate a generated 1,000-tool manifest (nested objects, $defs/$ref, anyOf with null, enums,
const, odd tool and property names, five servers) into every format: time and peak memory.

    .venv/bin/python bench/translate_bench.py [--tools N] [--repeat R]

Time is the best of R runs without tracing (tracemalloc slows allocation several-fold): wall
time and CPU time of this process (on a shared, loaded machine the CPU time is what the code
costs; the wall time also counts waiting for a core). Peak memory comes from one separate run
under tracemalloc.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from llmc_cli.model import Tool
from llmc_cli.translate import FORMATS, translate


def manifest(n: int) -> list[Tool]:
    tools = []
    for i in range(n):
        schema = {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "$defs": {"Address": {"type": "object", "title": "Address",
                                  "properties": {"street": {"type": "string", "title": "Street"},
                                                 "city": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
                                  "required": ["street"]}},
            "properties": {
                "id": {"type": "integer", "minimum": 0, "description": "Record id"},
                "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                "ship-to": {"$ref": "#/$defs/Address"},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "kind": {"const": "v1"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            "required": ["id"],
        }
        tools.append(Tool(f"server{i % 5}", f"tool.{i}", schema, description=f"Tool number {i}.",
                          title=f"Tool {i}", annotations={"readOnlyHint": i % 2 == 0}))
    return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tools = manifest(args.tools)
    print(f"{len(tools)} tools")
    print(f"{'format':26} {'wall ms':>8} {'cpu ms':>8} {'peak MiB':>9} {'warnings':>9}")
    for fmt in FORMATS:
        for strict in ((False, True) if fmt.startswith("openai") else (False,)):
            best = best_cpu = float("inf")
            for _ in range(args.repeat):
                started, started_cpu = time.perf_counter(), time.process_time()
                result = translate(tools, fmt, strict=strict)
                best = min(best, time.perf_counter() - started)
                best_cpu = min(best_cpu, time.process_time() - started_cpu)
            tracemalloc.start()
            translate(tools, fmt, strict=strict)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            label = fmt + (" --strict" if strict else "")
            print(f"{label:26} {1000 * best:8.1f} {1000 * best_cpu:8.1f} {peak:9.1f} {len(result.warnings):9}")


if __name__ == "__main__":
    main()

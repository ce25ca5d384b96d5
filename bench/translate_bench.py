"""Translate a generated 1,000-tool manifest (nested objects, $defs/$ref, anyOf with null,
enums, odd property names) into every format: time and peak memory (tracemalloc).

    .venv/bin/python bench/translate_bench.py [--tools N]
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
            "type": "object",
            "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"},
                                                                  "city": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
            "properties": {
                "id": {"type": "integer", "minimum": 0},
                "mode": {"enum": ["fast", "safe"], "default": "safe"},
                "ship-to": {"$ref": "#/$defs/Address"},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "kind": {"const": "v1"},
            },
            "required": ["id"],
        }
        tools.append(Tool(f"server{i % 5}", f"tool.{i}", schema, description=f"Tool number {i}.",
                          title=f"Tool {i}", annotations={"readOnlyHint": i % 2 == 0}))
    return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=1000)
    tools = manifest(parser.parse_args().tools)
    print(f"{'format':18} {'seconds':>8} {'peak MiB':>9} {'warnings':>9}")
    for fmt in FORMATS:
        for strict in ((False, True) if fmt.startswith("openai") else (False,)):
            tracemalloc.start()
            started = time.perf_counter()
            result = translate(tools, fmt, strict=strict)
            elapsed = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            print(f"{fmt + (' strict' if strict else ''):18} {elapsed:8.3f} {peak:9.1f} {len(result.warnings):9}")


if __name__ == "__main__":
    main()

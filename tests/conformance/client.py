"""The client command the official conformance suite runs: it appends the server URL, names the
scenario in MCP_CONFORMANCE_SCENARIO and may pass data in MCP_CONFORMANCE_CONTEXT. Every scenario
goes through the real `llmc` CLI, command after command as a user would type them (no --yes: a
typed call is the person's own decision); the first failing command's exit code is the client's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

LLMC = str(Path(sys.executable).parent / "llmc")

SCENARIOS: dict[str, list[list[str]]] = {
    # 2025-11-25 suite (and the same scenarios in the 2026-07-28 one)
    "initialize": [["tools", "list"]],
    "tools_call": [["call", "add_numbers", "a=2", "b=3"]],
    "elicitation-sep1034-client-defaults": [["call", "test_client_elicitation_defaults", "--elicit", "accept-defaults"]],
    "sse-retry": [["call", "test_reconnection"]],
    # 2026-07-28 suite
    "request-metadata": [["tools", "list"]],
    "json-schema-ref-no-deref": [["tools", "list"]],
    "http-invalid-tool-headers": [["tools", "list"], ["call", "valid_tool", "region=us-east1"]],  # region is required
    "http-standard-headers": [
        ["tools", "list"],
        ["call", "test_headers"],
        ["call", "my-hyphenated-tool"],
        ["resources", "list"],
        ["resources", "read", "file:///path/to/file%20name.txt"],
        ["resources", "read", "https://example.com/resource?id=123"],
        ["prompts", "list"],
        ["prompts", "get", "test_prompt"],
    ],
    "sep-2322-client-request-state": [
        ["call", name]
        for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type")
    ],
}


def commands(scenario: str, context: dict[str, Any]) -> list[list[str]]:
    if scenario == "http-custom-headers":  # the suite names the calls to make in its context
        return [["call", c["name"], "--json", json.dumps(c.get("arguments") or {})] for c in context.get("toolCalls", [])]
    return SCENARIOS.get(scenario, [])


def echo_a_schema(url: str) -> list[list[str]]:
    """json-schema-2020-12-preservation: list the tools (as a script would, from llmc's JSON),
    then hand the focal tool's inputSchema, as llmc printed it, to the echo tool. Every keyword
    the suite finds missing or changed is one llmc lost on the way."""
    listed = subprocess.run([LLMC, "tools", "list", "--url", url], capture_output=True, text=True, timeout=120)
    if listed.returncode:
        sys.stderr.write(listed.stderr)
        sys.exit(listed.returncode)
    focal = next(t for t in json.loads(listed.stdout)["tools"] if t["name"] != "json_schema_echo")
    return [["call", "json_schema_echo", "--json", json.dumps({"schema": focal["inputSchema"]})]]


def main() -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario == "json-schema-2020-12-preservation" and len(sys.argv) >= 2:
        todo = echo_a_schema(sys.argv[-1])
    else:
        todo = commands(scenario, context)
    if not todo or len(sys.argv) < 2:
        sys.exit(f"conformance client: unknown scenario {scenario!r}")
    for command in todo:
        code = subprocess.run([LLMC, *command, "--url", sys.argv[-1]], timeout=120).returncode
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())

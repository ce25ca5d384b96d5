"""The client command the official conformance suite runs: it appends the server URL and names
the scenario in MCP_CONFORMANCE_SCENARIO. Every scenario goes through the real `llmc` CLI."""

from __future__ import annotations

import os
import sys
from pathlib import Path

LLMC = str(Path(sys.executable).parent / "llmc")

SCENARIOS = {
    "initialize": ["tools", "list"],
    "tools_call": ["call", "add_numbers", "a=2", "b=3"],
    "elicitation-sep1034-client-defaults": ["call", "test_client_elicitation_defaults", "--elicit",
                                            "accept-defaults"],
    "sse-retry": ["call", "test_reconnection"],
    # 2026-07-28 suite
    "request-metadata": ["tools", "list"],
}


def main() -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario not in SCENARIOS or len(sys.argv) < 2:
        sys.exit(f"conformance client: unknown scenario {scenario!r}")
    os.execv(LLMC, [LLMC, *SCENARIOS[scenario], "--url", sys.argv[-1]])


if __name__ == "__main__":
    main()

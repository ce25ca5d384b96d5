"""Version negotiation: a server that answers the modern probe with UnsupportedProtocolVersion
(-32022) is taken at its word. Listing an initialize-era version llmc speaks: the handshake with
the best of them. Listing none llmc speaks: exit 6 and a message that says so, truthfully. (One
retry with a modern version the server lists: the conformance scenario request-metadata.)"""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers import PEERS, llmc

MISBEHAVING = str(PEERS / "misbehaving_stdio.py")


@pytest.mark.parametrize(
    "offered, code, version, says",
    [
        ("2025-06-18", 0, "2025-06-18", ""),
        ("2024-11-05,2025-03-26", 0, "2025-03-26", ""),  # the best common one
        ("1999-01-01", 6, None, "no common MCP version: the server speaks 1999-01-01; llmc speaks 2026-07-28, 2025-11-25"),
        ("1999-01-01,2030-01-01", 6, None, "the server speaks 1999-01-01, 2030-01-01"),
    ],
)
def test_a_server_that_refuses_the_version(offered, code, version, says):
    proc = llmc("ping", "--stdio", f"{sys.executable} {MISBEHAVING} versions {offered}")
    assert proc.returncode == code, proc.stderr
    if code == 0:
        server = json.loads(proc.stdout)["servers"][0]
        assert server["era"] == "legacy" and server["protocolVersion"] == version
    else:
        assert says in proc.stderr and "versions llmc does not" not in proc.stderr

"""A 2026-07-28 `subscriptions/listen` honours resource subscriptions only of servers the host's
clearance covers, as an initialize-era resources/subscribe and a resources/read do: a resource
of a server above it is not honoured, and the server is not started to look. In process: the
gateway's core (Toolbox, GatewayConnection) before a real SDK server (tests/peers/
conformance_target.py over HTTP, initialize era: it takes resources/subscribe)."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.toolbox import Toolbox
from tests.gateway.test_name_stability import META
from tests.helpers import PEERS, free_port

WATCHED = "docs.test://watched-resource"


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """The conformance target over HTTP, initialize era (it takes resources/subscribe)."""
    port = free_port()
    target = subprocess.Popen(
        [sys.executable, str(PEERS / "conformance_target.py"), "streamable-http", "--port", str(port), "--legacy"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(240):  # up to a minute on a loaded machine
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.25)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        target.terminate()
        target.wait(30)


@pytest.fixture
def toolbox(tmp_path: Path, upstream: str) -> Iterator[Toolbox]:
    profile = tmp_path / "gw.toml"
    profile.write_text(f'[servers.docs]\nurl = "{upstream}"\nclassification = "confidential"\n')
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


def listen(box: Toolbox, clearance: str) -> dict[str, Any]:
    """What a host of this clearance is acknowledged when it listens to WATCHED."""
    connection = GatewayConnection(box, transport="http")
    connection.clearance = clearance
    sent: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    params = {"notifications": {"resourceSubscriptions": [WATCHED]}, "_meta": META}
    try:
        connection.handle({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": params}, sent.put)
        first = sent.get(timeout=60)
    finally:
        connection.close()
    assert first.get("method") == "notifications/subscriptions/acknowledged", first
    return dict(first["params"]["notifications"])


@pytest.mark.usefixtures("isolated_dirs")
def test_a_listen_below_the_servers_classification_is_not_honoured_and_starts_nothing(toolbox: Toolbox) -> None:
    assert listen(toolbox, "internal") == {"resourceSubscriptions": []}
    assert "docs" not in toolbox.catalog.pool.sessions


@pytest.mark.usefixtures("isolated_dirs")
def test_a_listen_of_a_cleared_host_is_honoured(toolbox: Toolbox) -> None:
    assert listen(toolbox, "confidential") == {"resourceSubscriptions": [WATCHED]}

"""A gateway profile in front of real upstreams: the `mcp` SDK test server (stdio) and llmc's
built-in workspace server, with a policy that hides, limits and confirms."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PEERS, audit_trail

PROFILE = """\
description = "gateway tests"

[servers.sdk]
command = {python}
args = [{server}]
sandbox = "bwrap"  # a gateway with principals starts no unsandboxed stdio server

[servers.ws]
builtin = "workspace"
options = {{ roots = [{root}], read_only = false }}

[policy]
deny = ["sdk.crash", "ws.run_*", "ws.start_*"]
args = {{ "ws.read_file" = {{ path = [{allowed}] }} }}

[policy.hints]
"sdk.add" = {{ readOnly = true }}
"sdk.weather" = {{ readOnly = true }}
"sdk.log" = {{ readOnly = true }}
"sdk.slow" = {{ readOnly = true }}
"""


@pytest.fixture
def gateway_profile(tmp_path: Path) -> Path:
    """The profile file; its workspace root holds allowed/notes.txt and secret/key.txt."""
    import sys

    root = tmp_path / "ws"
    (root / "allowed").mkdir(parents=True)
    (root / "secret").mkdir()
    (root / "allowed" / "notes.txt").write_text("alpha\n")
    (root / "secret" / "key.txt").write_text("hunter2\n")
    path = tmp_path / "gw.toml"
    path.write_text(
        PROFILE.format(
            python=json.dumps(sys.executable),
            server=json.dumps(str(PEERS / "sdk_server.py")),
            root=json.dumps(str(root)),
            allowed=json.dumps(str(root / "allowed") + "/**"),
        )
    )
    return path


def audit_records(tmp_path: Path) -> list[dict[str, Any]]:
    """The audit trail the gateway wrote (state dir of the test)."""
    return audit_trail(Path(os.environ["LLMC_STATE_DIR"]))

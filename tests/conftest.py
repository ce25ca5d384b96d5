"""Every test gets its own config and state directories and no developer credentials."""

from __future__ import annotations

import os
from pathlib import Path

import mcp.client.stdio  # noqa: F401 - see below
import pytest

from tests.helpers import NODE_BIN

# The mcp SDK's stdio client binds `errlog=sys.stderr` when mcp.client.stdio is first imported. A
# test peer served in a thread of an in-process llmc() run (tests/peer_threads.py) could import it
# while sys.stderr is that run's temporary stream, which is detached afterwards: every later stdio
# host in the same worker then failed with "underlying buffer has been detached". Imported here,
# at start-up, it binds the real stderr.

SECRET_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "LLMC_")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point config and state at a temp dir and drop credentials a developer may have set."""
    for name in list(os.environ):
        if name.startswith(SECRET_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LLMC_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LLMC_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


# Tests that share something beyond their own temp dirs and free ports, run by one pytest-xdist
# worker in turn (scripts/test.sh runs `-n 2 --dist loadgroup`). One line per group; the path
# prefix is relative to tests/.
XDIST_GROUPS = {
    "state/": "postgres",  # one PostgreSQL cluster (and HAProxy) per worker otherwise: half the memory wasted
    # These scan every process of the machine (/proc) for regex workers and `sleep 300`: another
    # worker's searches and process tests would show up in their counts.
    "server/test_regex_and_limits.py": "process-scan",
    "server/test_escapes.py": "process-scan",
}


# Modules whose module-scoped fixtures start servers: each module stays on one worker, so they
# start once (spread over two workers, each would start its own).
WHOLE_MODULES = ("transports/", "agent/", "conformance/test_server_conformance.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        # The workspace server's process tests run once per sandbox (tests/server/conftest.py
        # SANDBOXES): under bubblewrap they are e2e (the rest of the e2e marks are in the modules).
        if "bwrap" in getattr(getattr(item, "callspec", None), "params", {}).values():
            item.add_marker(pytest.mark.e2e)
        where = Path(str(item.fspath)).relative_to(tests).as_posix()
        group = next((name for prefix, name in XDIST_GROUPS.items() if where.startswith(prefix)), None)
        if group is None and where.startswith(WHOLE_MODULES):
            group = where
        if group:
            item.add_marker(pytest.mark.xdist_group(group))

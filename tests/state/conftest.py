"""One PostgreSQL cluster for the session, a fresh database per test; the password comes from
PGPASSWORD (as a deployment would pass it), never from the url."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.state.postgres import PASSWORD, PostgresServer

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def state_url(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A migrated, empty database; LLMC_STATE_URL points at it for every llmc the test runs."""
    from tests.helpers import llmc

    url = postgres.create_database(f"t{next(_numbers)}")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("LLMC_STATE_URL", url)
    proc = llmc("state", "migrate")
    assert proc.returncode == 0, proc.stderr
    return url

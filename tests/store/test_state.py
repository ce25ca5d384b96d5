"""The State seam: services.open_state is the one choice of files or PostgreSQL, made once per
command and handed on; the file implementations of its protocols; policy decides, the state stores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmc_cli import services
from llmc_cli.config.profiles import LoadedProfile, load_profile
from llmc_cli.config.schema import PolicyConfig, Profile, StateConfig
from llmc_cli.errors import PolicyDenied, UsageError
from llmc_cli.store.state import FileState, PostgresState
from tests.helpers import llmc, profile_file

PACKAGE = Path(__file__).resolve().parents[2] / "llmc_cli"
URL = "postgresql://llmc@127.0.0.1:1/llmc"


def test_files_without_a_url(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMC_STATE_URL", raising=False)
    state = services.open_state(LoadedProfile("p", None, Profile()))
    assert isinstance(state, FileState) and state.kind == "files"


def test_the_environment_wins_over_the_profile_and_nothing_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmc_cli.store.postgres import Database

    def refuse(url: str) -> Database:
        raise AssertionError("a state was made, and nothing used yet: no connection")

    monkeypatch.setattr(Database, "for_url", refuse)
    monkeypatch.setenv("LLMC_STATE_URL", URL)
    state = services.open_state(LoadedProfile("p", None, Profile(state=StateConfig(url="postgresql://other/db"))))
    assert isinstance(state, PostgresState) and state.url == URL and state.kind == "database"
    assert state.approvals.is_approved  # the parts exist; none has touched the database


def test_file_rate_windows_count_until_full_then_count_nothing(isolated_dirs: Path) -> None:
    windows = FileState(LoadedProfile("p", None, Profile())).rate_windows
    limits = [("profile:p", 2), ("tool:p:*", 5)]
    assert windows.acquire(limits, 60.0) is None
    assert windows.acquire(limits, 60.0) is None
    full = windows.acquire(limits, 60.0)
    assert full is not None and full[:2] == ("profile:p", 2) and 0 <= full[2] < 60
    stored = json.loads((isolated_dirs / "state" / "ratelimit.json").read_text())
    assert len(stored["profile:p"]) == 2 and len(stored["tool:p:*"]) == 2  # the refused call counted nowhere


class Windows:
    """A RateWindows that remembers what it was asked and answers `full`."""

    def __init__(self, full: tuple[str, int, float] | None) -> None:
        self.full = full
        self.asked: list[list[tuple[str, int]]] = []

    def acquire(self, limits: list[tuple[str, int]], window: float) -> tuple[str, int, float] | None:
        self.asked.append(limits)
        return self.full


def test_the_policy_decides_the_windows_and_the_retry_the_state_only_counts() -> None:
    from llmc_cli import policy

    config = PolicyConfig(calls_per_minute=3, tool_calls_per_minute={"s.*": 1, "x.*": 9})
    untouched = Windows(None)
    policy.acquire_rate("p", "other.tool", Profile().policy, untouched)
    assert untouched.asked == []  # no limit applies: no store is asked
    full = Windows(("tool:p:s.*", 1, 45.0))
    with pytest.raises(PolicyDenied) as denied:
        policy.acquire_rate("p", "s.t", config, full)
    assert full.asked == [[("profile:p", 3), ("tool:p:s.*", 1)]]
    assert denied.value.details == {"retryAfter": 15.0, "rule": "tool:p:s.*"}


def test_file_approvals_are_the_profiles_own_list(isolated_dirs: Path) -> None:
    path = profile_file(isolated_dirs / "config", "[policy]\napproved = []\n")
    state = services.open_state(load_profile(str(path)))
    assert state.approvals.approve("ab" * 32, "s.t") == f"in {path}"
    state.approvals.approve("ab" * 32, "s.t")  # twice is once
    again = services.open_state(load_profile(str(path)))
    assert again.approvals.is_approved("ab" * 32) and not again.approvals.is_approved("cd" * 32)
    assert load_profile(str(path)).profile.policy.approved == ["ab" * 32]
    with pytest.raises(UsageError, match="built-in default profile"):
        FileState(LoadedProfile("default", None, Profile())).approvals.approve("ab" * 32, "s.t")


def test_a_command_composes_its_state_once(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llmc_cli.services.state as composition

    profile_file(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n[policy]\ncalls_per_minute = 2\n')
    (isolated_dirs / "work").mkdir()
    made = []
    real = composition.open_state

    def counted(profile: LoadedProfile) -> object:
        made.append(profile.name)
        return real(profile)

    monkeypatch.setattr(composition, "open_state", counted)
    monkeypatch.setattr(services, "open_state", counted, raising=False)
    monkeypatch.setattr("llmc_cli.services.pipeline.open_state", counted)  # bound at its import
    monkeypatch.chdir(isolated_dirs / "work")
    calls = "".join(json.dumps({"tool": "workspace.list_directory", "arguments": {"path": "."}}) + "\n" for _ in range(3))
    proc = llmc("call", "--batch", "-", stdin=calls)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert made == ["default"], proc.stderr
    assert ["error" in line for line in lines] == [False, False, True], lines  # the third is over the limit


def _modules() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}


def test_only_services_state_asks_files_or_postgresql() -> None:
    """Reading LLMC_STATE_URL or a profile's `[state] url`, and making a FileState or PostgresState,
    happen in services/state.py alone (config/secrets.py reads the url only to mask it)."""
    asks = re.compile(
        r"environ(\.get\(|\[)\s*(URL_VAR|\"LLMC_STATE_URL\")|profile\.state\.url|"
        r"\b(FileState|PostgresState)\("
    )
    found = sorted(name for name, text in _modules().items() if asks.search(text))
    assert found == ["config/secrets.py", "services/state.py"]


def test_the_database_is_reached_only_through_store_postgres() -> None:
    """Only the state database's own modules, and the audit chain over it, open a Database."""
    opens = re.compile(r"\bDatabase(\.for_url)?\(")
    found = sorted(name for name, text in _modules().items() if opens.search(text))
    assert found == [
        "audit/postgres.py",
        "store/postgres/approvals.py",
        "store/postgres/rate.py",
        "store/postgres/results.py",
        "store/postgres/sessions.py",
        "store/state.py",
    ]

"""The state a command or the gateway keeps beyond one call, behind small protocols, in one of two
bundles: FileState (files under the state directory, per user and machine) or PostgresState (the
`[state] url` database, shared by every llmc that uses it). services/state.py composes one per
command or gateway and hands it on; nothing else asks "files or PostgreSQL?".

What each bundle holds: `rate_windows` (RateWindows), `approvals` (Approvals), `results`
(store/results.py ResultCache); a PostgresState also makes the gateway's HostSessions. The audit
chain over either store is audit/'s (services/state.py audit_log). EraCache and TokenStore are the
protocol package's (mcp/stores.py); their files are store/era_cache.py and store/tokens.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Literal, Protocol

from llmc_cli.config import paths
from llmc_cli.model import JSONObject
from llmc_cli.store.approvals import FileApprovals

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.store.postgres import Database
    from llmc_cli.store.results import ResultCache

URL_VAR = "LLMC_STATE_URL"  # wins over the profile's `[state] url` (services/state.py open_state)


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class RateWindows(Protocol):
        """The per-minute windows of the rate limits (policy/rate.py decides what to count and says no)."""

        def acquire(self, limits: list[tuple[str, int]], window: float) -> tuple[str, int, float] | None:
            """Count one call now against each (key, limit) unless a key already has `limit` calls in
            the last `window` seconds: then (key, limit, seconds since the oldest of them), and nothing
            is counted. A count that cannot be stored is a ConfigError: the call does not run."""

    class Approvals(Protocol):
        """Pre-approved exact calls (their policy.call_hash) of one profile: with files, the profile's
        own [policy] `approved` list; with a database, its table, which every machine reads."""

        def is_approved(self, digest: str) -> bool: ...

        def approve(self, digest: str, tool: str) -> str:
            """Record an approval (twice is once); where it went, for a message ("in FILE", ...)."""

    class HostSessions(Protocol):
        """Initialize-era sessions shared by the replicas of a gateway: what a replica needs to go on
        serving a session it did not open (its handshake and principal). Failures are LlmcError (a
        state database that is down)."""

        def save(self, session_id: str, record: JSONObject) -> None: ...

        def resume(self, session_id: str) -> JSONObject | None:
            """The record, marked as used now; None when unknown or idle too long."""

        def exists(self, session_id: str) -> bool:
            """Still open (not ended through any replica, not idle too long); read only."""

        def forget(self, session_id: str) -> None:
            """Ended for every replica: each one's next check says so, and each one's listener ends it at once."""

        def ready(self) -> bool:
            """The store can be used now (for /readyz)."""

        def start(
            self,
            stopped: threading.Event,
            held: Callable[[], list[str]],
            ended: Callable[[str], None],
            log: Callable[[str], None],
        ) -> None:
            """Until `stopped`: this replica's lease, and ending here the sessions other replicas end."""

        def stop(self) -> None: ...


class FileState:
    """Files under the state directory, resolved at each use (tests point LLMC_STATE_DIR elsewhere
    after a command's state is made): rate windows in ratelimit.json, cached results in results/;
    approvals go into the profile's own `approved` list. Host sessions live in the replica that
    opened them."""

    kind: Literal["files"] = "files"

    def __init__(self, profile: LoadedProfile) -> None:

        self.profile = profile
        self.approvals: Approvals = FileApprovals(profile)

    # The windows and the cache load with their first use: a profile without rate limits or
    # [cache] never reads their modules (issue 34: each module is ~0.5 M instructions of a start).
    @cached_property
    def rate_windows(self) -> RateWindows:
        from llmc_cli.store.windows import FileRateWindows

        return FileRateWindows()

    @cached_property
    def results(self) -> ResultCache:  # one per state: `dropped` tells about its last lookup
        from llmc_cli.store.results import FileResultCache

        return FileResultCache(paths.state_dir() / "results")


class PostgresState:
    """The state database at `url`: psycopg is imported, and the database reached, only when a
    part of it is first used (a command that counts no rate and writes no audit never connects)."""

    kind: Literal["database"] = "database"

    def __init__(self, url: str, profile: LoadedProfile) -> None:
        from llmc_cli.store.postgres import parts  # the PostgreSQL side: loaded here, and only here

        self._parts = parts
        self.url = url
        self.profile = profile
        self.rate_windows: RateWindows = parts.PostgresRateWindows(url)
        self.approvals: Approvals = parts.PostgresApprovals(url, profile.name)
        self.results: ResultCache = parts.PostgresResultCache(url)

    @cached_property
    def database(self) -> Database:
        """The connection every part of this state shares (StateError, or the missing extra, here)."""
        return self._parts.Database.for_url(self.url)

    def host_sessions(self, idle_seconds: float, close_lost: Callable[[str], int]) -> HostSessions:
        """The gateway's sessions in this database; `close_lost(closer)` closes, in the audit chain,
        the calls of replicas that are gone."""
        return self._parts.PostgresHostSessions(self.url, idle_seconds, close_lost=close_lost)


State = FileState | PostgresState

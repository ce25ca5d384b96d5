"""Which state a command or the gateway keeps: the ONE place that asks "files or PostgreSQL?"
(LLMC_STATE_URL, else the profile's `[state] url`; neither: files). open_state is called once per
command (services.open_calls) or per served profile (gateway/toolbox.py), and the State is
carried on each Invocation, so the pipeline, the rate limits, approvals, the result cache and the
audit take what they are handed. The audit chain and the gateway's host sessions are composed here too: each
needs audit/ code over the store, which store/ may not import."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from llmc_cli.audit.log import AuditLog
from llmc_cli.store.state import URL_VAR, FileState, PostgresState

if TYPE_CHECKING:
    from llmc_cli.audit.postgres import PostgresAuditLog
    from llmc_cli.audit.trail import ChainedLog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.store.state import HostSessions, State


def open_state(profile: LoadedProfile) -> State:
    """The profile's state: a PostgresState when a url is set (nothing connects, and psycopg is
    not imported, until a part of it is used), else a FileState."""

    url = os.environ.get(URL_VAR) or profile.profile.state.url or None
    return PostgresState(url, profile) if url else FileState(profile)


def audit_log(state: State) -> ChainedLog:
    """The audit chain of the state: the database's, else the profile's JSON Lines file."""

    if isinstance(state, PostgresState):
        return _database_audit(state)
    profile = state.profile.profile
    return AuditLog(profile.audit_log, sync=profile.audit.sync)


def host_sessions(state: State, idle_seconds: float) -> HostSessions | None:
    """Where the gateway shares its initialize-era host sessions between replicas: the state
    database's, or None with files (a session lives in the replica that opened it). The replica
    closes the calls of replicas that are gone in the audit chain of that database."""

    if not isinstance(state, PostgresState):
        return None
    return state.host_sessions(idle_seconds, close_lost=_database_audit(state).close_lost_calls)


def _database_audit(state: PostgresState) -> PostgresAuditLog:
    from llmc_cli.audit.postgres import PostgresAuditLog  # only for a state database

    return PostgresAuditLog(state.url)

"""What every keeper of the audit chain shares: the JSON Lines file (audit/log.py) and the
database (audit/postgres.py over store/postgres/chain.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from llmc_cli.model import JSONObject, canonical_json, sha256

GENESIS = "0" * 64  # the `prev` of a chain's first record, and the head of an empty chain


# A TypedDict for the type checker only: a plain dict at run time, as mcp/messages.py's shapes
# (creating the class costs half a millisecond of every command's start-up, issue 34).
if TYPE_CHECKING:

    class AuditRecord(TypedDict, total=False):
        """One record of the audit trail as services writes it (call_tool, read, a batch, an interrupted
        command): who ran which call, then the policy's decision or the call's outcome. Fields with
        no value are left out. The chain adds time (a Deferred adds it earlier), prev and hash."""

        # who
        user: str
        host: str
        pid: int
        profile: str
        command: str  # call | ask | batch | serve ...
        conversation: str
        client: JSONObject  # the MCP host through the gateway: clientInfo, principal
        # which call: a tool, or a read (resources/read of a URI, prompts/get of a prompt)
        server: str
        tool: str
        resource: str  # the URI read
        prompt: str  # the prompt's name
        arguments: Any  # masked
        callHash: str
        event: str  # decision | outcome
        # a decision
        decision: str  # allow | deny | confirm
        rule: str | None
        reason: str
        # an outcome
        outcome: str  # ok | tool_error | denied | timeout | cancelled | interrupted | lost | ...
        replica: str  # lost: the gateway replica that decided the call and is gone
        closedBy: str  # lost: the replica that wrote the record
        error: str
        durationMs: float
        resultBytes: int
        resultSha256: str
        result: Any  # with audit_results, masked
        findings: list[Any]  # what the pipeline's inspectors found in the result (services/inspect.py), masked
        # the chain
        time: str
        prev: str
        hash: str

else:
    AuditRecord = dict


if TYPE_CHECKING:  # protocols, for the type checker only: ~0.1 M instructions each to create at import

    class AuditSink(Protocol):
        """Where call_tool writes its audit records: the JSON Lines file (audit.AuditLog), the chain
        in PostgreSQL (audit.PostgresAuditLog), or a batch's audit.Deferred in front of either.
        Decisions are stored before this returns, and an AuditError (exit 3) says when they cannot
        be: a decision that is not stored stops its call. Outcomes may wait in a Deferred."""

        def record(self, record: AuditRecord, *, before_action: bool) -> None: ...

        def record_before_actions(self, records: list[AuditRecord]) -> None:
            """Decision records of calls about to run, stored together (one write where the sink can)."""
            ...

        def flush(self) -> None:
            """Store what waits in memory (a Deferred's outcome records); a log stores at once."""
            ...

        def mark(self) -> int:
            """What settle() takes after record_before_actions ([audit] sync = "before_reply")."""
            ...

        def settle(self, mark: int) -> None:
            """The records stored up to `mark` durable (AuditError when they cannot be)."""
            ...


# The fields every record of one call carries alike (call_tool's `base`): what ties an outcome to
# its decision.
CALL_FIELDS = ("user", "host", "pid", "profile", "command", "conversation", "client", "server", "tool", "arguments", "callHash")


def call_key(record: JSONObject) -> str:
    """The same for a call's decision and its outcome records; two calls alike in every field
    (the same arguments from the same host) share it, and either outcome closes either decision."""

    return sha256(canonical_json([record.get(k) for k in CALL_FIELDS]).encode("utf-8")).hexdigest()

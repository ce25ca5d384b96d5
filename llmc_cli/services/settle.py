"""[audit] sync = "before_reply": an allowed call's decision record, written before the call is
sent (Pipeline.decide), made durable while its server works and in any case before a result, an
error or a refusal of the call goes on (the pipeline calls these at each of those points)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.audit.records import AuditError
from llmc_cli.errors import LlmcError
from llmc_cli.mcp.inflight import AFTER_SEND
from llmc_cli.model import JSONObject

if TYPE_CHECKING:
    from llmc_cli.services.calls import Authorization
    from llmc_cli.store.chain import AuditSink


def settle(log: AuditSink, authorized: Authorization, what: str) -> None:
    """The call's decision durable, or AuditError (exit 3) saying it is not and `what` became of
    the call. Nothing for a call whose decision was durable when it was written (durable_at 0)."""
    if authorized.durable_at:
        try:
            log.settle(authorized.durable_at)
        except AuditError as exc:
            raise AuditError(f"{exc.message}; its decision is not durable: {what}") from None


def send_settling(log: AuditSink, authorized: Authorization, send: Callable[[], JSONObject]) -> JSONObject:
    """send(), the decision made durable once the request is out (mcp/inflight.AFTER_SEND: the
    log's fdatasync beside the server's work, in this thread) and again checked before its result
    or error goes on. A transport that waits for the reply in send() (HTTP) overlaps nothing."""

    def settle_quietly() -> None:
        try:
            log.settle(authorized.durable_at)
        except LlmcError:
            pass  # settled again below, where a failure is reported

    AFTER_SEND.call = settle_quietly
    try:
        raw = send()
    except BaseException:
        AFTER_SEND.call = None
        settle(log, authorized, "the call may have run, but its error is withheld")
        raise
    AFTER_SEND.call = None
    settle(log, authorized, "the call ran, but its result is withheld")
    return raw

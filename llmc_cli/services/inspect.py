"""The pipeline's inspect stage (services/pipeline.py): what a server (or the result cache) answered
is handed, before anyone sees it, to an ordered list of inspectors. Each may change the result
(redact it), add findings (recorded in the call's outcome record, under "findings"), or deny the
call with a policy decision (the outcome record says `denied`, the caller gets PolicyDenied and
nothing of the result). The guardrails (DLP, classification) plug in here: inspectors_for()."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from llmc_cli.model import JSONObject, ServerSpec, ToolCall

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.policy import Decision
    from llmc_cli.services.reads import Read


@dataclass(frozen=True)
class Inspection:
    """What one inspector made of a result. All fields empty: nothing to say."""

    result: JSONObject | None = None  # the result as it goes on (e.g. redacted); None: unchanged
    findings: tuple[JSONObject, ...] = ()  # JSON objects for the outcome record (masked as it is)
    deny: Decision | None = None  # the call is denied: its result goes nowhere


class Inspector(Protocol):
    """One check of a result. `request`: the resolved call (ToolCall) or read (Read); `server`:
    its server's configuration (None for one the catalog does not configure, e.g. a keeper's).
    Called on worker threads (a batch, `ask`, the gateway), on fresh and cached results alike."""

    name: str

    def __call__(
        self, request: ToolCall | Read, profile: LoadedProfile, server: ServerSpec | None, result: JSONObject
    ) -> Inspection | None: ...


def inspectors_for(profile: LoadedProfile) -> tuple[Inspector, ...]:
    """The inspectors every call and read of this profile passes, in order (made once per
    command or host session, by the caller's context). None are built in yet: the guardrails
    add theirs here, made from the profile's configuration."""
    return ()


@dataclass(frozen=True)
class Inspected:
    """The inspect stage's verdict on one result: the result to deliver, every finding, and the
    first denial, if any (inspectors after a denial are not asked)."""

    result: JSONObject
    findings: list[JSONObject]
    deny: Decision | None = None


def inspect(
    inspectors: Sequence[Inspector],
    request: ToolCall | Read,
    profile: LoadedProfile,
    server: ServerSpec | None,
    result: JSONObject,
) -> Inspected:
    """Every inspector in order, each seeing the result as the ones before it left it."""
    findings: list[JSONObject] = []
    for inspector in inspectors:
        seen = inspector(request, profile, server, result)
        if seen is None:
            continue
        findings.extend({"inspector": inspector.name, **f} for f in seen.findings)
        if seen.deny is not None:
            return Inspected(result, findings, seen.deny)
        if seen.result is not None:
            result = seen.result
    return Inspected(result, findings)

"""The pipeline's inspect stage (services/pipeline.py): what a server (or the result cache) answered
is handed, before anyone sees it, to an ordered list of inspectors. Each may change the result
(redact it), add findings (recorded in the call's outcome record, under "findings"), or deny the
call with a policy decision (the outcome record says `denied`, the caller gets PolicyDenied and
nothing of the result). The guardrails (DLP, classification) plug in here: inspectors_for()."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from llmc_cli import policy
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.errors import RpcError
from llmc_cli.model import JSONObject, NamedTuple, ServerSpec, ToolCall

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.secrets import Masker
    from llmc_cli.errors import LlmcError
    from llmc_cli.guard.dlp import Scanner
    from llmc_cli.policy import Decision
    from llmc_cli.services.reads import Read

    # The inspect stage's verdict on one result: the result to deliver, every finding, and the
    # first denial, if any (inspectors after a denial are not asked). A plain tuple: its one
    # caller unpacks it, and a NamedTuple costs ~0.45 M instructions to create at import.
    Inspected = tuple[JSONObject, list[JSONObject], Decision | None]


class Inspection(NamedTuple):
    """What one inspector made of a result. All fields empty: nothing to say. (A NamedTuple: an
    inspector makes one for each result it has something to say of, cheaper than a dataclass.)"""

    result: JSONObject | None = None  # the result as it goes on (e.g. redacted); None: unchanged
    findings: tuple[JSONObject, ...] = ()  # JSON objects for the outcome record (masked as it is)
    deny: Decision | None = None  # the call is denied: its result goes nowhere


# A Protocol for mypy only: at run time annotations alone name it (strings, under `from __future__
# import annotations`); making a Protocol class costs ~0.3 M instructions at every start-up (session 16).
if TYPE_CHECKING:

    class Inspector(Protocol):
        """One check of a result. `request`: the resolved call (ToolCall) or read (Read); `server`:
        its server's configuration (None for one the catalog does not configure, e.g. a keeper's).
        Called on worker threads (a batch, `ask`, the gateway), on fresh and cached results alike."""

        name: str

        def __call__(
            self, request: ToolCall | Read, profile: LoadedProfile, server: ServerSpec | None, result: JSONObject
        ) -> Inspection | None: ...
else:
    Inspector = object


def inspectors_for(profile: LoadedProfile) -> tuple[Inspector, ...]:
    """The inspectors every call and read of this profile passes, in order (made once per
    command or host session, by the caller's context): DLP ([dlp], guard/dlp.py) when any
    server of the profile has detectors to run. (Calls a model makes also pass
    InstructionsInspector: Invocation.inspectors.)"""
    config = profile.profile
    if config.dlp.redact or config.dlp.block or any(s.redact or s.block for s in config.servers.values()):
        return (DlpInspector(profile),)
    return ()


class InstructionsInspector:
    """A result that carries instructions addressed to the model (guard/scan.py's high
    model_instruction, exfiltration_link and hidden_unicode rules: read sensitive files, pass
    secrets or the conversation, keep something from the user, ignore earlier instructions) is
    flagged in its outcome record ({"rule": ...}); the result goes on unchanged, as data."""

    name = "instructions"
    # guard/scan.py's instruction_rule, imported at the first result (the scan compiles its
    # patterns at import; an import statement per call costs more than the search of a short text)
    _rule_of: Callable[[str], str | None] | None = None

    def __call__(
        self, request: ToolCall | Read, profile: LoadedProfile, server: ServerSpec | None, result: JSONObject
    ) -> Inspection | None:
        texts = _texts(result)
        if not texts:
            return None
        rule_of = InstructionsInspector._rule_of
        if rule_of is None:
            from llmc_cli.guard.scan import instruction_rule

            rule_of = InstructionsInspector._rule_of = instruction_rule
        rule = rule_of(texts[0] if len(texts) == 1 else "\n".join(texts))
        return None if rule is None else Inspection(findings=({"rule": rule},))


def _texts(result: JSONObject) -> list[str]:
    """The text parts of a tool result, resource contents or prompt messages (first level)."""
    out: list[str] = []
    for key in ("content", "contents", "messages"):
        items = result.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                inner = item.get("content") if isinstance(item.get("content"), dict) else item
                text = inner.get("text") if isinstance(inner, dict) else None
                if isinstance(text, str):
                    out.append(text)
    return out


class DlpInspector:
    """DLP on every text a result carries (guard/dlp.py): `redact` kinds replaced by
    [REDACTED:kind], a `block` kind found denies the call (rule dlp.block:KIND). Findings: one
    {"kind", "count"} per kind found, never a value. Also redacts an upstream's error (error())."""

    name = "dlp"

    def __init__(self, profile: LoadedProfile) -> None:
        self.profile = profile
        self._known: Masker | None = None

    def _scanner(self, request: ToolCall | Read) -> Scanner | None:
        from llmc_cli.guard import dlp

        rules = dlp.rules_for(self.profile.profile, request.server)
        if not rules:
            return None
        known = None
        if "profile_secret" in rules.kinds:
            if self._known is None:
                self._known = Masker(environment_secrets(self.profile.profile))
            known = self._known.with_arguments(request.arguments)
        return dlp.Scanner(rules, known)

    def __call__(
        self, request: ToolCall | Read, profile: LoadedProfile, server: ServerSpec | None, result: JSONObject
    ) -> Inspection | None:
        scanner = self._scanner(request)
        if scanner is None:
            return None
        seen = scanner.inspect(result)
        if not seen.found:
            return None
        findings: tuple[JSONObject, ...] = tuple({"kind": kind, "count": count} for kind, count in seen.found.items())
        if seen.blocked:
            what = f"the result of {request.tool}" if isinstance(request, ToolCall) else f"the {request.kind} {request.name}"
            rule, reason = seen.denial(what)
            return Inspection(findings=findings, deny=policy.Decision("deny", rule, reason))
        return Inspection(result=seen.result, findings=findings)

    def error(self, request: ToolCall | Read, exc: LlmcError) -> None:
        """An upstream's error message and details with the findings redacted (a blocked kind too:
        an error shows nothing the block withholds)."""
        scanner = self._scanner(request)
        if scanner is None:
            return
        exc.message = scanner.text(exc.message, {})
        exc.args = (exc.message, *exc.args[1:])
        exc.details = scanner.inspect(exc.details).result
        if isinstance(exc, RpcError):
            exc.data = exc.details.get("data")


def inspect_error(inspectors: Sequence[Inspector], request: ToolCall | Read, exc: LlmcError) -> None:
    """An upstream's error (its message may carry what a result would) through the inspectors that
    look at errors too (an `error(request, exc)` method), before anyone sees it."""
    for inspector in inspectors:
        error = getattr(inspector, "error", None)
        if error is not None:
            error(request, exc)


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
            return result, findings, seen.deny
        if seen.result is not None:
            result = seen.result
    return result, findings, None

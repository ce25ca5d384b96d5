"""Who runs a command's tool calls (Invocation) and what its calls conclude alike (Conclusions):
made once per command (services.open_calls) or per host call of the gateway (services.host_calls),
read by every stage of services/pipeline.py. Out of services/calls.py, which keeps the parts of
one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli import policy
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.guard import clearance
from llmc_cli.model import JSONObject, Tool, ToolCall
from llmc_cli.services import inspect as inspect_stage  # a module attribute: tests replace inspectors_for

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.policy.rules import NameDenials
    from llmc_cli.services.inspect import Inspector
    from llmc_cli.services.routes import Route
    from llmc_cli.store.chain import AuditSink
    from llmc_cli.store.state import State


class Conclusions:
    """What an invocation concludes once for all of its calls, whatever their arguments: the
    policy's verdicts on its tools (policy.decide; each used only while the tool and the policy
    are the very objects it was concluded of, so a new listing or policy is judged afresh), which
    servers its clearance may use, its clearance, denials by name (policy.denied_by_name, under
    the very policy too), its inspectors and its approval key. Its own, or handed in to be shared
    by invocations of the same profile, caller, clearance and inspection: the gateway makes an
    invocation per host call, and would otherwise conclude all of it again for every call. Filled
    as calls need it, from any thread (each value is the same whoever works it out first)."""

    __slots__ = ("approval_key", "cleared_for", "cleared_servers", "inspectors", "named", "verdicts")

    def __init__(self) -> None:
        self.verdicts: policy.Verdicts = {}
        self.named: NameDenials = {}  # policy.denied_by_name's, by SERVER.TOOL (each under its policy)
        self.cleared_servers: dict[str, bool] = {}
        self.cleared_for: str | None = None
        self.inspectors: tuple[Inspector, ...] | None = None
        self.approval_key: bytes | None = None


class Invocation:
    """Who runs a tool call and how a human may be asked about it: the caller's context, made
    once per command (services.open_calls) or per host call of the gateway (services.host_calls).
    A plain class, not a dataclass (a millisecond at import; a keeper's call is mostly start-up).

    profile; state: the profile's state (services.open_state), composed once by whoever runs the
    command or the gateway: the rate windows, approvals and result cache every call uses, and the
    audit chain's store. command: call | ask | batch. caller: "human", a command a person typed
    (call, call --batch); "model", calls an LLM chose (ask, sampling, the gateway), the default:
    the guarded one. interactive: a human can answer a confirmation prompt; assume_yes: --yes,
    confirmations answered yes; confirm: how the human is asked. audit: where the records go
    (None: the state's audit log; the gateway's audit.Deferred). client: who asked, when that is
    not this process's user: an MCP host through the gateway (its clientInfo and, over HTTP, the
    authenticated principal), recorded in every audit record. environment_masker: the masking of
    the environment's and the profile's secrets, when the caller already made it (the gateway
    makes an invocation per call; its environment and profile are fixed). use_cache: False for
    --no-cache, every call goes to its server (its answer still cached). host_session: the
    gateway's host session (a random id per connection), which a `per_session` server's cached
    results belong to; None for a local command (such servers are then not cached). inspection:
    the inspect stage's inspectors (services/inspect.py), in order; None: the profile's
    (inspectors_for). clearance: the highest server classification this caller may use
    (guard/clearance.py); None: the default of its kind ([policy] clearance for a person, the
    model's for anyone else). conclusions: what its calls conclude alike (Conclusions), shared with
    the other invocations of the same profile, caller, clearance and inspection (the gateway's host
    calls); None: its own. rate_share: a gateway principal's (name, own calls per minute)."""

    def __init__(
        self,
        profile: LoadedProfile,
        state: State,
        command: str = "call",
        caller: str = "model",
        interactive: bool = False,
        assume_yes: bool = False,
        confirm: Callable[[ToolCall, Tool | None], bool] | None = None,
        conversation_id: str | None = None,
        audit: AuditSink | None = None,
        client: JSONObject | None = None,
        environment_masker: Masker | None = None,
        use_cache: bool = True,
        host_session: str | None = None,
        inspection: tuple[Inspector, ...] | None = None,
        clearance: str | None = None,
        conclusions: Conclusions | None = None,
        rate_share: tuple[str, int] | None = None,
    ) -> None:
        self.profile, self.state, self.command, self.caller = profile, state, command, caller
        self.interactive = interactive
        self.assume_yes = assume_yes
        self.confirm = confirm
        self.conversation_id = conversation_id
        self.audit = audit
        self.client = client
        self.environment_masker = environment_masker
        self.use_cache = use_cache
        self.host_session = host_session
        self.inspection = inspection
        self.clearance = clearance
        self.rate_share = rate_share
        self.conclusions = Conclusions() if conclusions is None else conclusions
        self.verdicts = self.conclusions.verdicts  # the policy's conclusions on this command's tools (policy.decide)
        self.cleared_servers = self.conclusions.cleared_servers  # whether cleared_for may use each server (clearance_denial)
        # what authorize concludes alike of the calls of each (server, tool) (services/routes.py Route; None: seen once)
        self.routes: dict[tuple[str, str], Route | None] = {}

    @property
    def cleared_for(self) -> str:
        """The clearance this invocation's calls, reads and listings are judged by."""
        known = self.conclusions.cleared_for
        if known is None:
            if self.clearance is not None:
                known = clearance.capped(self.clearance, self.profile.profile)
            elif self.caller == "human":
                known = clearance.human(self.profile.profile)
            else:
                known = clearance.model(self.profile.profile)
            self.conclusions.cleared_for = known
        return known

    @property
    def inspectors(self) -> tuple[Inspector, ...]:
        if self.inspection is not None:
            return self.inspection
        known = self.conclusions.inspectors
        if known is None:
            found = inspect_stage.inspectors_for(self.profile)
            # what a model reads next (ask, the gateway): text in it that addresses the model is flagged
            known = (*found, inspect_stage.InstructionsInspector()) if self.caller == "model" else found
            self.conclusions.inspectors = known
        return known

    @property
    def approval_key(self) -> bytes:
        """The key of this invocation's call hashes (policy.approval_key), read once: it is looked
        up in the environment and the state directory, which a batch would do twice per call."""
        known = self.conclusions.approval_key
        if known is None:
            known = self.conclusions.approval_key = policy.approval_key()
        return known

    @property
    def masker(self) -> Masker:
        """Masks the secret values of the environment and the profile in audit records; made
        once per invocation (a batch would otherwise scan the environment twice per call). Not
        a cached_property: its first read takes a lock, and the gateway reads it once per call."""
        if self.environment_masker is None:
            self.environment_masker = Masker(environment_secrets(self.profile.profile))
        return self.environment_masker

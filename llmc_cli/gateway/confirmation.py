"""Asking a host's user about a call a model wants to make (a `confirm` rule of the policy): by
elicitation on the connection (initialize era), or by an input_required result the host answers
by retrying the call (2026-07-28; what earlier rounds settled travels sealed in the
requestState). A host that cannot ask gets a refusal that says how to pre-approve the call."""

from __future__ import annotations

import json
from collections.abc import Callable

from llmc_cli.errors import LlmcError, PolicyDenied
from llmc_cli.gateway.request_state import RequestStates
from llmc_cli.mcp.messages import JSONObject, object_at
from llmc_cli.model import ToolCall
from llmc_cli.policy.approval import hint

CONFIRM_KEY = "confirm"  # the input request's key in a 2026-07-28 input_required result


class InputRound(Exception):
    """A 2026-07-28 host must answer an elicitation first: the reply is this input_required result."""

    def __init__(self, result: JSONObject) -> None:
        super().__init__("input required")
        self.result = result


def rounds_so_far(
    states: RequestStates, principal: str | None, call: ToolCall, params: JSONObject, modern: str | None
) -> tuple[bool, JSONObject]:
    """2026-07-28: what earlier rounds of this call settled (requestState, sealed by us) and the
    host's answers to the round it retries."""
    confirmed, answers = states.unpack(call, params.get("requestState"), principal) if modern else (False, {})
    responses = params.get("inputResponses")
    if isinstance(responses, dict):
        answers = {**answers, **{k: v for k, v in responses.items() if k.startswith("upstream-")}}
    return confirmed, answers


def question(call: ToolCall) -> JSONObject:
    return {
        "message": f"Run {call.qualified_name} with {summary(call.arguments)}?",
        "requestedSchema": {"type": "object", "properties": {}},
    }


def in_rounds(
    states: RequestStates, principal: str | None, call: ToolCall, params: JSONObject, round_state: dict[str, bool]
) -> bool:
    """The 2026-07-28 way: a yes of an earlier round, sealed in the requestState, or the host's
    answer to the round we asked for; else a new round (InputRound)."""
    if round_state["confirmed"]:
        return True
    answer = object_at(params, "inputResponses").get(CONFIRM_KEY)
    if not isinstance(answer, dict) or not states.asked_to_confirm(call, params.get("requestState"), principal):
        sealed = states.pack(call, False, {}, principal=principal, confirming=True)
        raise InputRound(
            {
                "resultType": "input_required",
                "requestState": sealed,
                "inputRequests": {CONFIRM_KEY: {"method": "elicitation/create", "params": {"mode": "form", **question(call)}}},
            }
        )
    round_state["confirmed"] = answer.get("action") == "accept"
    return round_state["confirmed"]


def by_elicitation(call: ToolCall, legacy_version: str | None, ask: Callable[[JSONObject], JSONObject]) -> bool:
    """The initialize era's way: an elicitation/create request on the host's connection."""
    asked = question(call)
    if legacy_version == "2025-11-25":
        asked["mode"] = "form"
    try:
        return ask(asked).get("action") == "accept"
    except LlmcError:
        return False  # no answer is no yes


def denial_text(exc: PolicyDenied, call: ToolCall, can_ask: bool) -> str:
    """What the host's model reads when a call is refused; a confirmation it could not be asked
    for says how a person pre-approves this exact call."""
    rule = str(exc.details.get("rule") or "")
    if not rule.startswith("confirm") or can_ask:
        return exc.message
    return (
        f"{call.qualified_name} needs a person's confirmation ({rule}) and this MCP host cannot ask for "
        f"one (it declares no elicitation capability)"
        + (f". To pre-approve this exact call: {hint(exc.approval)}" if exc.approval is not None else "")
    )


def summary(arguments: JSONObject, limit: int = 120) -> str:
    """The arguments as a person reads them in a question: key=value, long values shortened."""
    if not arguments:
        return "no arguments"
    parts = []
    for key, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={text if len(text) <= limit else text[:limit] + '…'}")
    return ", ".join(parts)

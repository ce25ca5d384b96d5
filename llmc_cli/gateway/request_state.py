"""The gateway's 2026-07-28 requestState: what earlier rounds of a host's call settled (the user's
yes to a confirmation, the host's answers to upstream requests), sealed so that only this process
can make one and it holds for one exact call of one principal."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

from llmc_cli.model import JSON, JSONObject, ToolCall, compact_json
from llmc_cli.policy import call_hash


class RequestStates:
    def __init__(self) -> None:
        self._secret = os.urandom(32)  # binds a state to this process: another cannot make one

    def pack(
        self, call: ToolCall, confirmed: bool, answers: JSONObject, *, principal: str | None, confirming: bool = False
    ) -> str:
        """A requestState bound to this exact call (tool and arguments) of this principal (another's
        host cannot replay its yes or its answers): whether the host's user said yes, the host's
        answers to upstream requests so far, and whether it carries a confirmation question."""

        # The one compact form (model.py), text as it is: the token is shorter for answers in
        # other scripts than \u-escapes would make it, and surrogatepass carries a lone surrogate
        # in a host's answer through to unpack unchanged (JSON can hold one; UTF-8 cannot).
        state = {"call": call_hash(call), "principal": principal, "confirmed": confirmed, "confirming": confirming}
        body = compact_json({**state, "answers": answers}).encode("utf-8", "surrogatepass")
        payload = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
        return payload + "." + self._mac(payload)

    def unpack(self, call: ToolCall, state: JSON, principal: str | None) -> tuple[bool, JSONObject]:
        """(confirmed, answers) of a requestState this process made for this call of this
        principal; else (False, {})."""
        data = self._open(call, state, principal)
        if data is None:
            return False, {}
        answers = data.get("answers")
        return data.get("confirmed") is True, answers if isinstance(answers, dict) else {}

    def asked_to_confirm(self, call: ToolCall, state: JSON, principal: str | None) -> bool:
        """Whether this requestState went out with the confirmation question for this call."""
        data = self._open(call, state, principal)
        return data is not None and data.get("confirming") is True

    def _mac(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def _open(self, call: ToolCall, state: JSON, principal: str | None) -> JSONObject | None:

        if not isinstance(state, str) or "." not in state:
            return None
        payload, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None  # tampered with, or made by another gateway process
        try:
            body = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            data = json.loads(body.decode("utf-8", "surrogatepass"))
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("call") != call_hash(call) or data.get("principal") != principal:
            return None
        return data

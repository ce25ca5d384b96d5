"""A call's audit records are built in fewer steps (services/calls.py: the base fields made masked
where they are made, the decision's and outcome's fields added to one copy of them; config/secrets:
a flat object's secret arguments found in one loop), and are the very records the steps before
made: the base equal to masked() of the unmasked one, key for key and in order; the decision's
reason masked; secrets found under every shape of arguments as the walk finds them."""

from __future__ import annotations

from typing import Any

import pytest

from llmc_cli import audit
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.schema import Profile
from llmc_cli.config.secrets import MASK, Masker, argument_secrets
from llmc_cli.model import ToolCall
from llmc_cli.policy import Decision
from llmc_cli.services import calls
from llmc_cli.services.state import open_state

ENV_SECRET = "envsecret-0123456789"
ARG_SECRET = "argsecret-9876543210"


def invocation(**kwargs: Any) -> calls.Invocation:
    profile = LoadedProfile("t", None, Profile())
    return calls.Invocation(profile, open_state(profile), environment_masker=Masker([ENV_SECRET]), **kwargs)


@pytest.mark.usefixtures("isolated_dirs")
@pytest.mark.parametrize("with_context", [False, True])
def test_the_base_is_what_masked_made_of_it(with_context: bool) -> None:
    extra: dict[str, Any] = {}
    if with_context:  # the client is masked as masked() masks it, the conversation id is kept
        extra = {"conversation_id": f"conv {ENV_SECRET}", "client": {"name": f"agent {ARG_SECRET}", "principal": "p"}}
    context = invocation(command="batch", **extra)
    call = ToolCall("srv", f"tool-{ENV_SECRET}", {"apiKey": ARG_SECRET, "message": f"say {ENV_SECRET}", "n": 1})
    decision = Decision("deny", "deny: srv.*", f"refused {ARG_SECRET}", "hmac-sha256:00")
    authorized = calls._authorization(context, call, decision, None)

    masker = context.masker.with_arguments(call.arguments)
    unmasked: dict[str, Any] = {**audit.identity(), "profile": "t", "command": "batch"}
    if with_context:
        unmasked["conversation"], unmasked["client"] = extra["conversation_id"], extra["client"]
    unmasked |= {"server": "srv", "tool": call.tool, "arguments": masker(call.arguments), "callHash": "hmac-sha256:00"}
    expected = calls.masked(unmasked, masker)  # type: ignore[arg-type]
    assert authorized.base == expected
    assert list(authorized.base) == list(expected)
    assert authorized.base["tool"] == f"tool-{MASK}"
    assert authorized.base["arguments"] == {"apiKey": MASK, "message": f"say {MASK}", "n": 1}
    if with_context:
        assert authorized.base["conversation"] == f"conv {ENV_SECRET}"  # llmc's own id: not free text
        assert authorized.base["client"] == {"name": f"agent {MASK}", "principal": "p"}

    record = authorized.decision_record()
    assert record == {**expected, "event": "decision", "decision": "deny", "rule": "deny: srv.*", "reason": f"refused {MASK}"}
    assert authorized.base == expected  # the base itself is not touched by a record made of it
    outcome = calls.with_base(authorized.base, "outcome", {"outcome": "tool_error", "error": f"bad {ARG_SECRET}"}, masker)
    assert outcome == {**expected, "event": "outcome", "outcome": "tool_error", "error": f"bad {MASK}"}
    assert list(outcome)[: len(expected) + 1] == [*expected, "event"]


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({}, set()),
        ({"message": "m", "n": 1, "flag": True, "none": None}, set()),
        ({"apiKey": "s1", "message": "m"}, {"s1"}),
        ({"token": 123, "password": None, "secret": True}, {"123"}),
        ({"message": "m", "outer": {"password": "p"}}, {"p"}),
        ({"password": {"a": 1, "b": ["x", None]}}, {"1", "x"}),
        ({"list": [{"token": "t"}], "apiKey": "k"}, {"t", "k"}),
        ([{"token": "t"}], {"t"}),
        ("text", set()),
    ],
)
def test_secret_arguments_are_found_in_every_shape(arguments: object, found: set[str]) -> None:
    assert argument_secrets(arguments) == found
    masker = Masker(["unrelated-secret"])
    widened = masker.with_arguments(arguments)
    assert (widened is masker) == (not found)
    assert widened.secrets == masker.secrets | found


# Arguments that masking or their shape keep off the quick paths (flat_arguments, flat_scalars)
NOT_ALL_PLAIN: list[object] = [
    {"message": f"say {ENV_SECRET}", "other": ENV_SECRET, f"key {ENV_SECRET}": 1},
    {ENV_SECRET: 1, "***": 2},  # two keys masked alike
    {"apiKey": "s1", "message": "s1"},  # a secret by name: it masks the message too
    {"message": "m", "outer": {"a": 1}},
    {"list": ["x"]},
    {1: "x"},
    [{"token": "t"}],
    "text",
]


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"message": "m", "n": 1, "flag": True, "none": None, "f": 0.5},
        *NOT_ALL_PLAIN,
    ],
)
def test_flat_arguments_are_what_with_arguments_masks(arguments: object) -> None:
    """Masker.flat_arguments (calls.Route's masking of a call's arguments) is with_arguments'
    masker's copy where it answers, and it answers only where that masker is the same one."""
    masker = Masker([ENV_SECRET])
    flat = masker.flat_arguments(arguments)
    widened = masker.with_arguments(arguments)
    if flat is not None:
        assert widened is masker
        assert flat == widened(arguments) and list(flat) == list(widened(arguments))
    assert (flat is not None) == (
        type(arguments) is dict
        and all(isinstance(k, str) for k in arguments)
        and not any(isinstance(v, (dict, list)) for v in arguments.values())
        and not argument_secrets(arguments)
        and len({masker.text(k) for k in arguments}) == len(arguments)
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"message": "m", "n": 1, "flag": True, "none": None},
        {"message": "m", "f": 0.5},  # a float: hashed only as json writes it (the long way)
        {"message": "m", "big": 10**30},
        *NOT_ALL_PLAIN,
    ],
)
def test_flat_scalars_are_flat_arguments_without_floats(arguments: object) -> None:
    """Masker.flat_scalars (a batch Route's masking of most calls' arguments, hashed as they are
    encoded) answers as flat_arguments does, for objects of text, integers, booleans and nulls
    only: a float (whose text orjson writes otherwise than json) takes the long way."""
    masker = Masker([ENV_SECRET])
    for _ in range(2):  # the second time, its names known as plain (secrets._PLAIN_NAMES)
        scalars = masker.flat_scalars(arguments)
        flat = masker.flat_arguments(arguments)
        if scalars is not None:
            assert scalars == flat and list(scalars) == list(flat)  # type: ignore[arg-type]
        floats = isinstance(arguments, dict) and any(isinstance(v, float) for v in arguments.values())
        assert (scalars is not None) == (flat is not None and not floats)

"""With the npm reference server-everything: an image result reaching each API its own way, and
a server's sampling request answered by the profile's model during a run."""

from __future__ import annotations

import pytest

from llmc_cli.agent import ask, sampler
from llmc_cli.model import ServerSpec
from llmc_cli.providers.base import ProviderSettings, make_provider
from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import sent_results, turn
from tests.helpers import node_tool

pytestmark = pytest.mark.e2e  # the npm reference server-everything


def provider_for(api, fake):
    return make_provider(api, ProviderSettings(model="model-x", api_key="k", base_url=fake.base_url))


def everything(hooks=None):
    from llmc_cli.catalog import Catalog, ConnectOptions

    return Catalog([ServerSpec("ev", command=(node_tool("mcp-server-everything"),))], ConnectOptions(hooks))


def name_of(api, tools, tool):
    from llmc_cli.agent import provider_tool_names
    from llmc_cli.translate import translate

    return next(n for n, owner in provider_tool_names(translate(tools, api)).items() if owner == ("ev", tool))


@pytest.mark.parametrize("api", ["anthropic", "openai", "gemini"])
def test_image_result(api):
    with everything() as catalog:
        tools = catalog.tools_of("ev")
        image = name_of(api, tools, "get-tiny-image")
        with FakeLLM(api, [turn(api, None, [("call_1", image, {})]), turn(api, "A tiny image.")]) as fake:
            record = ask("Show me", provider=provider_for(api, fake), tools=tools, call_tool=lambda c: _call(catalog, c))
    assert record.steps[0]["outcome"] == "ok"
    body = fake.bodies[1]
    if api == "anthropic":
        [block] = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
        kinds = [c["type"] for c in block["content"]]
        assert "image" in kinds and block["content"][kinds.index("image")]["source"]["media_type"] == "image/png"
    elif api == "gemini":
        fr = body["contents"][-1]["parts"][0]["functionResponse"]
        assert fr["parts"][0]["inline_data"]["mime_type"] == "image/png"
    else:  # Chat Completions takes no images in a tool message: a placeholder names it
        assert "[image image/png]" in sent_results(api, body)[0]["text"]


def _call(catalog, call):
    from llmc_cli import services
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import Profile

    profile = LoadedProfile("t", None, Profile())
    calls = services.open_calls(catalog, profile, command="call", caller="model", assume_yes=True)
    return calls.run(services.ToolRequest.of(call)).tool_result


def test_sampling_request_answered_by_the_model():
    from llmc_cli.mcp.hooks import ClientHooks

    api = "anthropic"
    with FakeLLM(api, [turn(api, "Sampled words.")]) as sampling_fake, FakeLLM(api, []) as loop_fake:
        hooks = ClientHooks(sample=sampler(provider_for(api, sampling_fake), max_tokens=40))
        with everything(hooks) as catalog:
            tools = catalog.tools_of("ev")
            trigger = name_of(api, tools, "trigger-sampling-request")
            loop_fake.script += [
                turn(api, None, [("call_1", trigger, {"prompt": "hello", "maxTokens": 500})]),
                turn(api, "The server got its sample."),
            ]
            record = ask("sample", provider=provider_for(api, loop_fake), tools=tools, call_tool=lambda c: _call(catalog, c))
    assert "Sampled words." in record.steps[0]["seen"]
    [request] = sampling_fake.bodies
    assert request["system"] == "You are a helpful test server." and "tools" not in request
    assert request["max_tokens"] == 40  # capped by the profile
    assert "temperature" not in request  # the Messages API (anthropic 2.12) has none
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Resource trigger-sampling-request context: hello"}]}
    ]

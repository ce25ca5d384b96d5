"""The precedence of an `ask` run's settings, in-process: command line > continued conversation
(provider, model) > profile [llm] > LlmConfig's defaults. One row per rule."""

from __future__ import annotations

from typing import Any

import pytest

from llmc_cli.agent import AskOptions, Conversation, resolve_settings
from llmc_cli.config.schema import LlmConfig
from llmc_cli.errors import UsageError

PROFILE = LlmConfig(
    provider="openai",
    model="profile-model",
    api_key_env="PROFILE_KEY",
    base_url="http://profile",
    temperature=0.5,
    max_tokens=100,
    max_steps=4,
    timeout=60.0,
    system="profile system",
)
HELD = Conversation.new("anthropic", "held-model", "held system")


PROVIDER_FIELDS = {"model", "api_key_env", "base_url", "temperature", "max_tokens"}  # of ProviderSettings


def settings_field(settings: Any, name: str) -> Any:
    return getattr(settings.provider_settings if name in PROVIDER_FIELDS else settings, name)


@pytest.mark.parametrize(
    "given, conversation, field, expected",
    [
        (AskOptions(), None, "provider", "openai"),
        (AskOptions(), HELD, "provider", "anthropic"),  # a conversation goes on with its provider
        (AskOptions(provider="gemini"), HELD, "provider", "gemini"),
        (AskOptions(), None, "model", "profile-model"),
        (AskOptions(), HELD, "model", "held-model"),
        (AskOptions(model="cli-model"), HELD, "model", "cli-model"),
        (AskOptions(), None, "api_key_env", "PROFILE_KEY"),
        (AskOptions(api_key_env="CLI_KEY"), None, "api_key_env", "CLI_KEY"),
        (AskOptions(base_url="http://cli"), None, "base_url", "http://cli"),
        (AskOptions(), None, "temperature", 0.5),
        (AskOptions(temperature=0.0), None, "temperature", 0.0),  # 0 is given, not absent
        (AskOptions(max_tokens=7), None, "max_tokens", 7),
        (AskOptions(), None, "max_steps", 4),
        (AskOptions(max_steps=2), None, "max_steps", 2),
        (AskOptions(), None, "timeout", 60.0),
        (AskOptions(total_timeout=5.0), None, "timeout", 5.0),
        (AskOptions(), None, "system_for_new", "profile system"),
        (AskOptions(system="cli system"), None, "system_for_new", "cli system"),
        (AskOptions(), HELD, "system_override", None),  # the held conversation keeps its own
        (AskOptions(system="cli system"), HELD, "system_override", "cli system"),
    ],
)
def test_precedence(given: AskOptions, conversation: Conversation | None, field: str, expected: Any) -> None:
    assert settings_field(resolve_settings(given, PROFILE, conversation), field) == expected


def test_defaults_come_from_llm_config() -> None:
    settings = resolve_settings(AskOptions(provider="openai"), LlmConfig())
    assert (settings.max_steps, settings.timeout, settings.result_budget, settings.allow_sampling) == (
        LlmConfig().max_steps,
        LlmConfig().timeout,
        LlmConfig().result_budget,
        False,
    )


def test_no_provider_anywhere_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no provider"):
        resolve_settings(AskOptions(), LlmConfig())

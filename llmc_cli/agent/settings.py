"""Which settings an `ask` run uses: the one place that decides the precedence, so every front end
(the CLI today) gets the same answer.

Precedence, highest first: what the caller gave (the command line) > the continued conversation
(its provider and model: a conversation goes on with the model it was held with) > the profile's
[llm] table > the defaults of LlmConfig.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli.agent.conversations import Conversation
from llmc_cli.errors import UsageError
from llmc_cli.model import dataclass
from llmc_cli.providers.base import ProviderSettings

if TYPE_CHECKING:
    from llmc_cli.agent.loop import Limits
    from llmc_cli.config.schema import LlmConfig


@dataclass(frozen=True)
class AskOptions:
    """What the caller asked for; None: not given (the conversation or the profile decides)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    total_timeout: float | None = None
    system: str | None = None
    tool_search: bool | None = None


@dataclass(frozen=True)
class AskSettings:
    provider: str
    provider_settings: ProviderSettings
    max_steps: int
    timeout: float  # the whole run, seconds
    result_budget: int
    allow_sampling: bool
    system_for_new: str | None  # the system prompt of a new conversation
    system_override: str | None  # replaces a continued conversation's system prompt when given
    tool_search: bool | None = None  # None: on past tool_search.THRESHOLD tools

    @property
    def limits(self) -> Limits:
        """The run's limits, as the loop takes them."""
        from llmc_cli.agent.loop import Limits

        return Limits(max_steps=self.max_steps, timeout=self.timeout, result_budget=self.result_budget)


def resolve_settings(given: AskOptions, llm: LlmConfig, conversation: Conversation | None = None) -> AskSettings:
    """The settings of one run (UsageError when no provider is named anywhere)."""
    provider = given.provider or (conversation.provider if conversation else None) or llm.provider
    if not provider:
        raise UsageError("no provider: give --provider or set [llm] provider in the profile")
    model = given.model or (conversation.model if conversation else None) or llm.model
    # the conversation's own endpoint, unless another provider is asked for now
    kept = conversation if conversation and provider == conversation.provider else None
    settings = ProviderSettings(
        model=model,
        api_key_env=given.api_key_env or llm.api_key_env,
        base_url=given.base_url or (kept.base_url if kept else None) or llm.base_url,
        temperature=given.temperature if given.temperature is not None else llm.temperature,
        max_tokens=given.max_tokens or llm.max_tokens,
    )
    return AskSettings(
        provider=provider,
        provider_settings=settings,
        max_steps=given.max_steps or llm.max_steps,
        timeout=given.total_timeout or llm.timeout,
        result_budget=llm.result_budget,
        allow_sampling=llm.allow_sampling,
        system_for_new=given.system or llm.system,
        system_override=given.system,
        tool_search=given.tool_search if given.tool_search is not None else llm.tool_search,
    )

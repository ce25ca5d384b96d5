"""The one registry of providers and tool formats (llmc_cli/model.py) is what every part uses: a
provider added there and nowhere else fails here, naming what is missing."""

from __future__ import annotations

import importlib
import typing

import click
import pytest

from llmc_cli.config.validation import validate
from llmc_cli.errors import ConfigError
from llmc_cli.model import LINT_FORMATS, PROVIDERS, TOOL_FORMATS, ProviderName
from llmc_cli.providers.base import DEFAULT_KEY_ENV, ProviderSettings, make_provider
from llmc_cli.translate import translate
from llmc_cli.translate.names import RULES


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_provider_runs_and_sends_its_tools_in_a_known_format(name: str) -> None:
    provider = make_provider(name, ProviderSettings(model="m", api_key="k", base_url="http://127.0.0.1:9"))
    assert (provider.name, provider.format) == (name, name)
    assert provider.format in TOOL_FORMATS
    assert DEFAULT_KEY_ENV[name]


@pytest.mark.parametrize("fmt", TOOL_FORMATS)
def test_every_tool_format_translates(fmt: str) -> None:
    assert translate([], fmt).format == fmt
    names = importlib.import_module(f"llmc_cli.translate.{fmt.replace('-', '_')}").NAMES
    assert names is None or names in RULES  # the tool-name rule of the API (None: MCP's own names)


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    [param] = [p for p in command.params if p.name == option]
    assert isinstance(param.type, click.Choice)
    return tuple(param.type.choices)


def test_the_cli_and_the_profile_schema_offer_the_registry() -> None:
    from llmc_cli.cli.ask import ask
    from llmc_cli.cli.tool_manifests import export, lint

    assert _choices(ask, "provider") == PROVIDERS
    assert _choices(export, "fmt") == TOOL_FORMATS
    assert _choices(lint, "providers") == LINT_FORMATS
    assert typing.get_args(ProviderName) == PROVIDERS
    for name in PROVIDERS:
        assert validate({"llm": {"provider": name}}, "p.toml").llm.provider == name
    with pytest.raises(ConfigError, match=r"llm\.provider"):
        validate({"llm": {"provider": "gemini-legacy"}}, "p.toml")  # a tool format, not a provider

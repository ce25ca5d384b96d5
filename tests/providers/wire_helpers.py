"""Shared bits of the provider tests: per-API tool definitions (test data, in each API's documented
shape) and a provider pointed at a fake."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from llmc_cli.providers.base import Provider, ProviderSettings, make_provider

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
DEFINITIONS: dict[str, Any] = {
    "openai": [
        {
            "type": "function",
            "function": {"name": "fs_read", "description": "Read a file.", "parameters": SCHEMA, "strict": False},
        }
    ],
    "openai-responses": [
        {"type": "function", "name": "fs_read", "description": "Read a file.", "parameters": SCHEMA, "strict": False}
    ],
    "anthropic": [{"name": "fs_read", "description": "Read a file.", "input_schema": SCHEMA}],
    "gemini": [{"name": "fs_read", "description": "Read a file.", "parameters_json_schema": SCHEMA}],
    "text": '- fs_read: Read a file. parameters: {"path": string (required)}',
}
KEY = "sk-test-SECRET-1234567890"


def tools(api: str) -> Any:
    """Stands in for a translate.Translation: the provider reads only `.definitions`."""
    return SimpleNamespace(definitions=DEFINITIONS[api])


def provider(api: str, base_url: str, **settings: Any) -> Provider:
    settings.setdefault("max_backoff", 0.05)
    return make_provider(api, ProviderSettings(model="model-x", api_key=KEY, base_url=base_url, **settings))

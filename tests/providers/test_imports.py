"""Start-up: the agent and the provider base import no SDK; a provider imports only its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

SDKS = ("openai", "anthropic", "google.genai", "httpx2", "pydantic")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {SDKS!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return set(out.stdout.split())


def test_agent_and_base_import_no_sdk():
    assert loaded_after("import llmc_cli.agent, llmc_cli.providers.base") == set()


@pytest.mark.parametrize(
    "name, sdk, others",
    [
        ("openai", "openai", {"anthropic", "google.genai"}),
        ("anthropic", "anthropic", {"openai", "google.genai"}),
        ("gemini", "google.genai", {"openai", "anthropic"}),
        ("text", "openai", {"anthropic", "google.genai"}),
    ],
)
def test_a_provider_imports_only_its_sdk(name, sdk, others):
    code = (
        "from llmc_cli.providers.base import ProviderSettings, make_provider\n"
        f"make_provider({name!r}, ProviderSettings(model='m', api_key='k', base_url='http://127.0.0.1:1'))"
    )
    loaded = loaded_after(code)
    assert sdk in loaded and not loaded & others

"""Provider errors through the real SDKs: each kind maps to ProviderError (exit 8) with the
provider's own message and never the key; transient ones are retried, bounded, honouring
retry-after; permanent ones are not retried."""

from __future__ import annotations

import time

import pytest

from llmc_cli.errors import ProviderError
from llmc_cli.providers.base import UserMessage
from tests.fakes.llm import ERRORS, FakeLLM, Reply
from tests.fakes.scripts import APIS, turn
from tests.helpers import free_port
from tests.providers.wire_helpers import KEY, provider

MESSAGES = {  # a word of each provider's own message that must reach the user
    "auth": {"openai": "Incorrect API key", "anthropic": "invalid x-api-key", "gemini": "API key not valid"},
    "context_length": {"openai": "maximum context length", "anthropic": "prompt is too long", "gemini": "input token count"},
}


def family(api: str) -> str:
    return "openai" if api in ("openai", "openai-responses", "text") else api


def ask_once(api: str, script: list[Reply], **settings):
    """One completion against a fake; its result (or ProviderError), the fake, and the seconds the
    completion took. The clock starts once the provider is made: making it imports the SDK, which
    took 3.4 s for anthropic on a loaded machine and is not what a test of timeouts measures."""
    with FakeLLM(api, script) as fake:
        p = provider(api, fake.base_url, **settings)
        started = time.monotonic()
        try:
            result: object = p.complete(None, [UserMessage("q")], None, timeout=20)
        except ProviderError as exc:
            result = exc
        return result, fake, time.monotonic() - started


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kind", ["auth", "context_length"])
def test_permanent_errors_are_not_retried(api, kind):
    exc, fake, _ = ask_once(api, [ERRORS[api][kind]()])
    assert isinstance(exc, ProviderError) and exc.exit_code == 8
    assert exc.details["reason"] == kind
    assert MESSAGES[kind][family(api)] in exc.message
    assert KEY not in exc.message and "\n" not in exc.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_rate_limit_honours_retry_after_then_succeeds(api):
    result, fake, seconds = ask_once(api, [ERRORS[api]["rate_limit"]("1"), turn(api, "fine")], max_backoff=5)
    assert result.text == "fine"
    assert len(fake.requests) == 2
    assert seconds >= 0.95  # waited the second the server asked for


@pytest.mark.parametrize("api", APIS)
def test_server_errors_and_overload_are_retried(api):
    result, fake, _ = ask_once(api, [ERRORS[api]["server"](), ERRORS[api]["overloaded"](), turn(api, "fine")])
    assert result.text == "fine" and len(fake.requests) == 3


@pytest.mark.parametrize("api", APIS)
def test_retries_are_bounded(api):
    exc, fake, _ = ask_once(api, [ERRORS[api]["overloaded"]() for _ in range(5)], max_retries=2)
    assert isinstance(exc, ProviderError) and exc.details["reason"] == "overloaded"
    assert "after 3 attempts" in exc.message
    assert len(fake.requests) == 3 and len(fake.script) == 2  # the rest was never asked for


def test_retry_after_is_capped():
    """A server asking for an hour does not hold llmc for an hour."""
    result, _fake, seconds = ask_once(
        "anthropic", [ERRORS["anthropic"]["rate_limit"]("3600"), turn("anthropic", "fine")], max_backoff=0.2
    )
    assert result.text == "fine" and seconds < 5


def test_retries_stop_at_the_callers_timeout():
    with FakeLLM("openai", [ERRORS["openai"]["rate_limit"]("2"), turn("openai", "late")]) as fake:
        p = provider("openai", fake.base_url, max_backoff=10)
        started = time.monotonic()
        with pytest.raises(ProviderError) as info:
            p.complete(None, [UserMessage("q")], None, timeout=1.0)
    assert time.monotonic() - started < 1.5 and info.value.details["reason"] == "rate_limit"
    assert len(fake.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_connection_refused(api):
    """Nothing listens there: said at once, with the URL (a retry would be refused the same)."""
    p = provider(api, f"http://127.0.0.1:{free_port()}" + ("/v1" if family(api) == "openai" else ""), max_retries=1)
    with pytest.raises(ProviderError) as info:
        p.complete(None, [UserMessage("q")], None, timeout=10)
    assert info.value.details["reason"] == "connection" and "attempts" not in info.value.message
    assert info.value.message.endswith(": Connection refused") and "connection to http://127.0.0.1:" in info.value.message
    assert KEY not in info.value.message


@pytest.mark.parametrize("api", APIS)
def test_slow_server_times_out(api):
    reply = turn(api, "too late")
    reply.delay = 3
    exc, _, seconds = ask_once(api, [reply], timeout=0.5, max_retries=0)
    assert isinstance(exc, ProviderError) and exc.details["reason"] == "timeout"
    assert seconds < 3  # gave up at its 0.5 s, long before the reply


def test_missing_key_and_model_are_one_line_errors(monkeypatch):
    from llmc_cli.errors import ConfigError, UsageError
    from llmc_cli.providers.base import ProviderSettings, make_provider

    with pytest.raises(ConfigError, match=r"set \$ANTHROPIC_API_KEY"):  # configuration: exit 3
        make_provider("anthropic", ProviderSettings(model="m"))
    with pytest.raises(ConfigError, match=r"set \$MY_KEY"):
        make_provider("gemini", ProviderSettings(model="m", api_key_env="MY_KEY"))
    with pytest.raises(UsageError, match="no model"):  # usage: exit 2
        make_provider("openai", ProviderSettings())
    with pytest.raises(ProviderError, match="unknown provider"):
        make_provider("palm", ProviderSettings(model="m"))
    monkeypatch.setenv("MY_KEY", "k-from-env")
    assert make_provider("gemini", ProviderSettings(model="m", api_key_env="MY_KEY")).settings.api_key == "k-from-env"
    # a local OpenAI-compatible server needs no key
    assert make_provider("openai", ProviderSettings(model="m", base_url="http://127.0.0.1:1/v1")).name == "openai"


def test_gemini_key_from_google_api_key(monkeypatch):
    from llmc_cli.providers.base import ProviderSettings, make_provider

    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert make_provider("gemini", ProviderSettings(model="m")).settings.api_key == "g-key"

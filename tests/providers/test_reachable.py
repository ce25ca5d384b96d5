"""A base URL where nothing listens (issue 39): the request through each real SDK fails at once
with the URL and "Connection refused" (not retried: every attempt would be refused the same),
and check_reachable, the one connect `ask` makes while servers without a cached listing start,
says the same; anything but a refusal is left to the request."""

from __future__ import annotations

import socket
import time

import pytest

from llmc_cli.errors import ProviderError
from llmc_cli.providers.base import ProviderSettings, UserMessage, make_provider
from llmc_cli.providers.reachable import check_reachable
from tests.helpers import free_port

PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def settings(base_url: str | None, retries: int = 1) -> ProviderSettings:
    return ProviderSettings(model="m", api_key="sk-secret-key", base_url=base_url, max_retries=retries, max_backoff=5)


@pytest.mark.parametrize(
    ("api", "path"), [("openai", "/v1"), ("text", "/v1"), ("openai-responses", "/v1"), ("anthropic", ""), ("gemini", "")]
)
def test_each_sdk_says_a_refused_base_url_at_once(api: str, path: str) -> None:
    url = f"http://127.0.0.1:{free_port()}{path}"
    provider = make_provider(api, settings(url, retries=3))
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        provider.complete(None, [UserMessage("hi")], None)
    assert time.monotonic() - started < 2  # one attempt: no backoff of 0.5 + 1 + 2 s
    assert info.value.message == f"{api}: connection to {url}: Connection refused"
    assert info.value.details["reason"] == "connection"


def test_a_refused_base_url_fails_like_a_request() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ProviderError) as info:
        check_reachable("openai", settings(url, retries=3))
    assert info.value.details["reason"] == "connection"
    assert info.value.message == f"openai: connection to {url}: Connection refused"


def test_a_listening_base_url_passes() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        check_reachable("anthropic", settings(f"http://127.0.0.1:{listener.getsockname()[1]}"))


def test_a_host_with_several_addresses_passes_when_one_listens() -> None:
    """`localhost` is ::1 and 127.0.0.1 on most systems: the SDK gets through when either
    listens, so a refusal at the other is no refusal of the base URL."""
    if len({info[4][0] for info in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)}) < 2:
        pytest.skip("localhost has one address here")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        check_reachable("openai", settings(f"http://localhost:{listener.getsockname()[1]}/v1"))
    with pytest.raises(ProviderError):
        check_reachable("openai", settings(f"http://localhost:{free_port()}/v1"))


@pytest.mark.parametrize("base_url", [None, "", "not a url", "unix:///tmp/x"])
def test_no_base_url_to_check_is_left_to_the_request(base_url: str | None) -> None:
    check_reachable("openai", settings(base_url))


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "ALL_PROXY", "all_proxy"])
def test_a_proxy_in_the_way_is_left_to_the_request(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, f"http://127.0.0.1:{free_port()}")
    # refused if connected to, but the request would go through the proxy: not checked here
    check_reachable("openai", settings(f"http://127.0.0.1:{free_port()}/v1"))


def test_a_host_the_proxy_is_bypassed_for_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with pytest.raises(ProviderError):
        check_reachable("openai", settings(f"http://127.0.0.1:{free_port()}/v1"))

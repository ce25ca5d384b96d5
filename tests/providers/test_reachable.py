"""check_reachable: a base URL that refuses connections fails as the request would (issue 39),
anything else is left to the request."""

from __future__ import annotations

import socket
import time

import pytest

from llmc_cli.errors import ProviderError
from llmc_cli.providers.base import ProviderSettings, check_reachable
from tests.helpers import free_port


def settings(base_url: str | None) -> ProviderSettings:
    return ProviderSettings(model="m", api_key="sk-secret-key", base_url=base_url, max_retries=1, max_backoff=0.1)


def test_a_refused_base_url_fails_like_a_request() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ProviderError) as info:
        check_reachable("openai", settings(url))
    assert info.value.details["reason"] == "connection"
    assert info.value.message == f"openai: connection to {url}: Connection refused (after 2 attempts)"


def test_a_listening_base_url_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        check_reachable("anthropic", settings(f"http://127.0.0.1:{listener.getsockname()[1]}"))


@pytest.mark.parametrize("base_url", [None, "", "not a url", "unix:///tmp/x"])
def test_no_base_url_to_check_is_left_to_the_request(base_url: str | None) -> None:
    check_reachable("openai", settings(base_url))


def test_a_proxy_in_the_way_is_left_to_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    # refused if connected to, but the request would go through the proxy: not checked here
    check_reachable("openai", settings(f"http://127.0.0.1:{free_port()}/v1"))


def test_the_run_time_limit_bounds_the_retries() -> None:
    patient = ProviderSettings(model="m", base_url=f"http://127.0.0.1:{free_port()}", max_retries=3, max_backoff=5)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        check_reachable("anthropic", patient, within=0.3)
    assert time.monotonic() - started < 2 and info.value.details["reason"] == "connection"

"""check_reachable: whether anything listens at a provider's base URL, asked with one TCP
connect (for `ask` runs that must start servers before their first model request)."""

from __future__ import annotations

import socket
import urllib.request
from urllib.parse import urlsplit

from llmc_cli.providers.base import Failure, ProviderSettings, call_with_retries, connection_failure


def check_reachable(provider: str, settings: ProviderSettings, timeout: float = 3.0) -> None:
    """Fail now (ProviderError, with the message the request would give: the base URL and
    "Connection refused", one attempt) when nothing listens at the base URL, for `ask` runs that
    must start servers before the first model request (their tools were never listed): a dead
    endpoint ends the run before they are waited for. Only a refusal counts; a slow or
    unresolvable host, any proxy that the SDKs would go through (HTTP(S)_PROXY, ALL_PROXY, not
    bypassed by NO_PROXY) and no base URL (the provider's public API) are left to the request.
    A host with several addresses is refused only when every address refuses (as for the SDK).
    `timeout`: seconds for one connection."""
    try:
        parts = urlsplit(settings.base_url or "")
        host, port = parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return
    if not host or port is None:
        return
    proxies = urllib.request.getproxies()
    if (proxies.get(parts.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host):
        return
    address = (host, port)

    def send(seconds: float) -> None:
        try:
            socket.create_connection(address, timeout=min(seconds, timeout)).close()
        except ConnectionRefusedError:
            raise
        except OSError:
            return  # not a refusal: the request will tell

    def classify(exc: BaseException) -> Failure | None:
        return connection_failure(exc) if isinstance(exc, ConnectionRefusedError) else None

    call_with_retries(provider, settings, send, classify)

"""The HTTP plumbing both HTTP transports share (Streamable HTTP and the legacy HTTP+SSE):
httpx2 clients (one per request in flight, on the leaner wire of http11.py), the user's headers, OAuth hooks, redirects, error mapping, stoppable streams.

This module is the HTTP stack's side of the transport seam: only the HTTP transports import it,
and mcp/client.py imports them when a server is remote, so a command without a remote server
never loads httpx2, ssl or http11.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import httpx2

from llmc_cli.errors import AuthError, ConnectionFailed, HttpStatusError, LlmcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSONObject, object_at
from llmc_cli.mcp.transports.base import AuthHook, max_message_bytes, too_large
from llmc_cli.mcp.transports.http11 import DEADLINE, SOCKET_WATCH, Http11Transport
from llmc_cli.mcp.transports.sse_parser import Event, events, lines
from llmc_cli.model import redact_url

if TYPE_CHECKING:
    import ssl
    from http.cookiejar import CookieJar

MAX_ERROR_BODY = 64 * 1024  # bytes of an error reply kept to look for a JSON-RPC error
MAX_AUTH_RETRIES = 6  # backstop: the auth hook bounds logins and step-ups itself (and says which ran out)
MAX_REDIRECTS = 3
MAX_IDLE_CLIENTS = 20  # idle keep-alive connections per channel (httpx's own default)


def preview(text: str, limit: int = 160) -> str:
    return " ".join(text.split())[:limit]


def proxied(url: str) -> bool:
    """Whether the environment sends requests for `url` through a proxy: read as httpx2 reads it
    (urllib's getproxies: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), less the hosts NO_PROXY exempts as
    curl and urllib match them."""
    if not any(name.lower().endswith("_proxy") and name.lower() != "no_proxy" for name in os.environ):
        return False  # the common case, without importing urllib.request (slow to import)
    import urllib.request

    proxies = urllib.request.getproxies()
    scheme, host, _ = origin(url)
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


def origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    return p.scheme.lower(), (p.hostname or "").lower(), p.port or {"http": 80, "https": 443}.get(p.scheme.lower())


class HttpChannel:
    """HTTP plumbing shared by both transports: httpx2 clients, the user's headers on every
    request (never logged), the OAuth hooks, error mapping, and streams that close() can stop."""

    def __init__(
        self, url: str, headers: dict[str, str] | None, timeout: float, auth: AuthHook | None, connect_timeout: float
    ) -> None:
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ConnectionFailed(f"not an http(s) URL: {redact_url(url)}")  # no userinfo or query: secrets go there
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.auth = auth
        self.connect_timeout = min(connect_timeout, timeout)
        self.closing = False
        self._client_lock = threading.Lock()  # guards the three below
        self._clients: set[httpx2.Client] = set()  # every open client, leased or idle
        self._idle: list[httpx2.Client] = []  # clients with no request in flight, newest last
        self._ssl_context: ssl.SSLContext | None = None  # one per channel: building it is most of a client's start (~25 ms)
        self._cookies: CookieJar | None = None  # one jar for all of them: a balancer's affinity cookie is the channel's
        self._leases: dict[httpx2.Response, httpx2.Client] = {}  # response -> the client it came from, until it is closed
        self._moved: dict[str, str] = {}  # URL -> where a same-origin redirect sent it
        self._urls: dict[str, httpx2.URL] = {}  # URL -> httpx2.URL (this URL, and where it was moved)
        self._streams: set[httpx2.Response] = set()
        self._streams_lock = threading.Lock()
        # Through a proxy httpx2 speaks to it with its own transport (it finds the proxy only when
        # given none); otherwise the leaner one. Decided once: the environment is the process's.
        self._proxied = proxied(url)

    def _lease(self) -> httpx2.Client:
        """A client for one request, with at most one connection, idle or new. Not one shared
        client: httpcore's pool probes every idle connection's socket (a poll(2) each) twice per
        request, so with N connections open to a busy upstream (the gateway's hosts calling at
        once) every request paid 2N system calls: a fifth of the gateway's CPU at 16 hosts."""

        with self._client_lock:
            if self._idle:
                return self._idle.pop()
            if self._ssl_context is None:
                self._ssl_context = httpx2.create_ssl_context()  # what Client(verify=True) makes, made once
                self._cookies = httpx2.Cookies().jar  # a jar (not Cookies) is shared, not copied
            client = httpx2.Client(
                timeout=httpx2.Timeout(self.timeout, connect=self.connect_timeout),
                follow_redirects=False,
                verify=self._ssl_context,
                cookies=self._cookies,
                limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1),
                transport=None if self._proxied else Http11Transport(self._ssl_context),
            )
            self._clients.add(client)
            return client

    def _give_back(self, client: httpx2.Client) -> None:
        """A client whose request is over: kept for the next one (at most MAX_IDLE_CLIENTS, as
        many idle connections as httpx keeps by default), else closed."""
        with self._client_lock:
            if client in self._clients and len(self._idle) < MAX_IDLE_CLIENTS:
                self._idle.append(client)
                return
            self._clients.discard(client)
        client.close()

    def _close(self, response: httpx2.Response) -> None:
        """Close a response this channel returned, and give its client back."""
        try:
            response.close()
        finally:
            with self._client_lock:
                client = self._leases.pop(response, None)
            if client is not None:
                self._give_back(client)

    def _parsed(self, url: str) -> httpx2.URL:
        """httpx parses a URL given as text on every request, a quarter of building one (the
        gateway's per-call cost): parsed once here."""

        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx2.URL(url)
        return parsed

    @property
    def direct(self) -> bool:
        """Requests go straight to the server on http11's transport (no proxy in between)."""
        return not self._proxied

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        *,
        body: bytes | None = None,
        read_timeout: float | str | None = "default",
        reauthorize: bool = True,
        watch_socket: Callable[[socket.socket | None], None] | None = None,
        deadline: float | None = None,
    ) -> httpx2.Response:
        """Send one request and return the open (streamed) response; the caller closes it.
        401/403 go through the OAuth hooks and are retried (unless `reauthorize` is False: closing
        a session or an optional stream must not start a login); failures become LlmcErrors.
        `watch_socket` (direct channels): given each attempt's socket before it is sent, and
        None once the reply's head is in (http11.SOCKET_WATCH). `deadline` (time.monotonic()):
        the head, and a body that is not an event stream, are in by then or the request times
        out, however slowly the bytes arrive (http11.DEADLINE; read timeouts count per read)."""

        extensions: dict[str, object] | None = {SOCKET_WATCH: watch_socket} if watch_socket is not None else None
        if deadline is not None:
            extensions = {**(extensions or {}), DEADLINE: deadline}
            left = max(deadline - time.monotonic(), 0.001)
            read_timeout = left if read_timeout is None or isinstance(read_timeout, str) else min(read_timeout, left)

        timeout = (
            None
            if isinstance(read_timeout, str)  # "default": the client's own timeouts
            else httpx2.Timeout(self.timeout, connect=self.connect_timeout, read=read_timeout)
        )
        url = self._moved.get(url, url)
        auth_tries = redirects = 0
        while True:
            all_headers = {**headers, **self.headers}
            authorization = self.auth.authorization_header() if self.auth is not None else None
            if authorization and not any(k.lower() == "authorization" for k in self.headers):
                all_headers["Authorization"] = authorization
            client = self._lease()
            try:
                req = client.build_request(
                    method,
                    self._parsed(url),
                    headers=all_headers,
                    content=body,
                    extensions=extensions,
                    timeout=httpx2.USE_CLIENT_DEFAULT if timeout is None else timeout,
                )
                response = client.send(req, stream=True)
            except BaseException as exc:
                self._give_back(client)
                if isinstance(exc, httpx2.TimeoutException):
                    raise TimeoutExpired(f"{method} {self._where(url)}: no answer within the timeout") from None
                if not isinstance(exc, httpx2.HTTPError):
                    raise
                if self.closing:
                    raise ConnectionFailed("connection closed") from None
                raise ConnectionFailed(f"cannot reach {self._where(url)}: {preview(str(exc)) or type(exc).__name__}") from None
            with self._client_lock:
                self._leases[response] = client
            status, location = response.status_code, response.headers.get("location")
            if location and (status in (307, 308) or (status in (301, 302) and method == "GET")):
                # /mcp/ -> /mcp and the like. Only on the same origin: the user's headers (and
                # token) must not follow a redirect elsewhere.
                target = urljoin(url, location)
                self.discard(response)
                if origin(target) != origin(url):
                    raise ConnectionFailed(f"{self._where(url)} redirects to another origin ({origin(target)[1]}): refused")
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise ConnectionFailed(f"{self._where(url)}: too many redirects")
                self._moved[url] = url = target
                continue
            if status in (401, 403):
                challenge = response.headers.get("www-authenticate")
                self.discard(response)
                auth_tries += 1
                if auth_tries > MAX_AUTH_RETRIES:
                    raise AuthError(f"{self._where(url)} still refuses authorization after {MAX_AUTH_RETRIES} attempts")
                if reauthorize and self.auth is not None and self.auth.on_unauthorized(status, challenge):
                    continue
                raise AuthError(
                    f"{self._where(url)} answered HTTP {status}: authorization {'refused' if status == 403 else 'required'}"
                )
            return response

    def read_body(self, response: httpx2.Response, limit: int | None = None) -> bytes:
        """A reply body, or its first `limit` bytes (what follows is not read)."""
        return self._read(response, limit, over_limit=None)

    def read_message(self, response: httpx2.Response, deadline: float | None = None) -> bytes:
        """A whole reply body that is one JSON-RPC message (or batch): ProtocolError (exit 6)
        when it is larger than the message limit, found before it is all in memory;
        TimeoutExpired when it is not whole by `deadline` (time.monotonic())."""
        limit = max_message_bytes()
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            self.discard(response)
            raise too_large(limit, "a reply body")
        return self._read(response, limit, over_limit=too_large(limit, "a reply body"), deadline=deadline)

    def _read(
        self, response: httpx2.Response, limit: int | None, over_limit: Exception | None, deadline: float | None = None
    ) -> bytes:
        """Read and close `response`; past `limit` bytes raise `over_limit`, or stop when it is None;
        past `deadline` TimeoutExpired (a direct channel ends a blocked read at it too: http11)."""

        chunks, size = [], 0
        try:
            for chunk in response.iter_bytes():
                if deadline is not None and time.monotonic() >= deadline:
                    raise httpx2.ReadTimeout("the call's deadline passed")
                size += len(chunk)
                if limit is not None and size > limit and over_limit is not None:
                    raise over_limit
                chunks.append(chunk)
                if limit is not None and size >= limit and over_limit is None:
                    break
        except httpx2.TimeoutException:
            raise TimeoutExpired(f"{self._where(self.url)}: reply body not complete within the timeout") from None
        except httpx2.HTTPError as exc:
            raise ConnectionFailed(f"{self._where(self.url)}: reply cut off: {preview(str(exc))}") from None
        finally:
            self._close(response)
        body = b"".join(chunks)
        return body[:limit] if limit is not None and over_limit is None else body

    def status_error(
        self, response: httpx2.Response, request: JSONObject | None, deliver: Callable[[JSONObject], None] | None
    ) -> None:
        """An HTTP error reply: deliver it when it is the JSON-RPC error answering `request`
        (modern servers answer 400/404 with one), else raise HttpStatusError."""
        body = self.read_body(response, MAX_ERROR_BODY)
        text = body.decode("utf-8", "replace")
        messages: list[JSONObject] = []
        if "json" in response.headers.get("content-type", ""):
            try:
                messages = jsonrpc.decode(body)
            except LlmcError:
                pass
        if (
            deliver is not None
            and request is not None
            and "id" in request
            and len(messages) == 1
            and "error" in messages[0]
            and messages[0].get("id") == request["id"]
        ):
            deliver(messages[0])
            return
        if len(messages) == 1 and isinstance(messages[0].get("error"), dict):
            reason = preview(str(object_at(messages[0], "error").get("message", "")), 120)  # an error for no request
        elif text.strip() and not text.lstrip().startswith("<"):
            reason = preview(text, 120)
        else:
            reason = response.reason_phrase  # HTML error pages say nothing useful in one line
        raise HttpStatusError(
            f"{self._where(self.url)} answered HTTP {response.status_code}" + (f": {reason}" if reason else ""),
            response.status_code,
            text,
            {k.lower(): v for k, v in response.headers.items() if k.lower() != "set-cookie"},
        )

    def extend_read_timeout(self, response: httpx2.Response, seconds: float | None) -> None:
        """Let the reads of an open response (a stream) wait up to `seconds` each. On a direct
        channel the socket's timeout is the request's until it is set again; behind a proxy
        httpx2 sets its own per read, and this has no effect."""
        stream = response.extensions.get("network_stream") if hasattr(response, "extensions") else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if self.direct and isinstance(sock, socket.socket):
            sock.settimeout(seconds)

    def read_events(self, response: httpx2.Response) -> Generator[Event, None, None]:
        """Events of an open SSE response until it ends; closing() interrupts it. A line or an
        event larger than the message limit raises ProtocolError (the stream is closed)."""

        with self._streams_lock:
            closing = self.closing
            if not closing:
                self._streams.add(response)
        if closing:
            self._close(response)
            return
        try:
            limit = max_message_bytes()
            yield from events(lines(response.iter_bytes(), limit), limit)
        except (httpx2.HTTPError, OSError, ValueError, RuntimeError):
            pass  # the stream broke (or was stopped): the caller decides whether to resume
        finally:
            with self._streams_lock:
                self._streams.discard(response)
            self.discard(response)

    def discard(self, response: httpx2.Response) -> None:
        try:
            self._close(response)
        except Exception:  # noqa: BLE001 - closing a broken stream may fail again
            pass

    def stop_stream(self, response: httpx2.Response) -> None:
        """Unblock a thread reading `response`: shut its socket down (closing an httpx response
        from another thread does not wake a blocked read)."""
        stream = response.extensions.get("network_stream") if hasattr(response, "extensions") else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop_all(self) -> None:
        self.closing = True
        with self._streams_lock:
            streams = list(self._streams)
        for response in streams:
            self.stop_stream(response)

    def close_client(self) -> None:
        """Close every client (and so every connection) of the channel; the next request opens anew."""
        with self._client_lock:
            clients, self._clients, self._idle, self._leases = self._clients, set(), [], {}
        for client in clients:
            client.close()

    def _where(self, url: str) -> str:
        # Never the query string or user info: they may carry a key or a session id.
        p = urlsplit(url)
        host = p.hostname or ""
        return f"{p.scheme}://{host}{f':{p.port}' if p.port else ''}{p.path}"


def is_event_stream(response: httpx2.Response) -> bool:
    """A 200 reply that opens an SSE stream (what a GET for a stream must get)."""
    return bool(response.status_code == 200 and "text/event-stream" in response.headers.get("content-type", ""))


def sleep_unless(stop: threading.Event, seconds: float) -> bool:
    """Sleep; False when `stop` was set meanwhile."""
    return not stop.wait(max(0.0, seconds))

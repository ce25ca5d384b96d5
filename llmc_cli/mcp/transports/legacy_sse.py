"""The deprecated HTTP+SSE transport of 2024-11-05 (2024-11-05 basic/transports.mdx).

GET the URL for an SSE stream; its first event, `endpoint`, names where to POST messages. Every
server message arrives on that stream as a `message` event; POST replies carry nothing (202).
The endpoint must be on the server's own origin: a stream that points our messages (and the
user's headers) elsewhere is refused.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from llmc_cli.errors import ConnectionFailed, LlmcError, ProtocolError, TimeoutExpired
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.transports.base import AuthHook, Closed, Deliver
from llmc_cli.mcp.transports.http_channel import HttpChannel, is_event_stream, origin

if TYPE_CHECKING:
    import httpx2

ENDPOINT_WAIT = 10.0  # seconds for the `endpoint` event (bounded by the timeout too)
NOTES_KEPT = 20


class LegacySseTransport:
    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        *,
        auth: AuthHook | None = None,
        connect_timeout: float = 10.0,
        endpoint_wait: float = ENDPOINT_WAIT,
    ) -> None:
        self.http = HttpChannel(url, headers, timeout, auth, connect_timeout)
        self.url = url
        self.endpoint_wait = min(endpoint_wait, timeout)
        self.protocol_version: str | None = None
        self.endpoint: str | None = None
        self._endpoint_ready = threading.Event()
        self._endpoint_error: LlmcError | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._notes: collections.deque[str] = collections.deque(maxlen=NOTES_KEPT)
        self._deliver: Deliver | None = None

    def start(self, deliver: Deliver, closed: Closed) -> None:
        self._deliver = deliver
        response = self.http.request("GET", self.url, {"Accept": "text/event-stream"}, read_timeout=None)
        if not is_event_stream(response):
            if response.status_code == 200:
                self.http.discard(response)
                raise ConnectionFailed(
                    f"{self.http._where(self.url)} is no SSE endpoint (content type "
                    f"{response.headers.get('content-type', 'none')})"
                )
            self.http.status_error(response, None, deliver)
        self._thread = threading.Thread(target=self._read, args=(response, deliver, closed), daemon=True, name="llmc-sse-stream")
        self._thread.start()
        if not self._endpoint_ready.wait(self.endpoint_wait):
            self.close()
            raise TimeoutExpired(f"{self.http._where(self.url)}: no `endpoint` event within {self.endpoint_wait:g}s")
        if self._endpoint_error is not None:
            self.close()
            raise self._endpoint_error

    def send(self, message: JSONObject) -> None:
        if self.endpoint is None or self._stopped:
            raise ConnectionFailed("SSE transport is not open")
        if message.get("method") == "notifications/cancelled":
            # Sent when a request timed out, often because the server hangs: never wait for it.
            threading.Thread(target=self._post_quietly, args=(message,), daemon=True, name="llmc-sse-cancel").start()
            return
        self._post(message)

    def _post_quietly(self, message: JSONObject) -> None:
        try:
            self._post(message)
        except LlmcError as exc:
            self._notes.append(f"{message.get('method')} not delivered: {exc.message}")

    def _post(self, message: JSONObject) -> None:
        assert self.endpoint is not None
        headers = {"Content-Type": "application/json"}
        if self.protocol_version and self.protocol_version != "2024-11-05":
            headers["MCP-Protocol-Version"] = self.protocol_version
        response = self.http.request("POST", self.endpoint, headers, body=jsonrpc.encode(message).encode("utf-8"))
        if 200 <= response.status_code < 300:
            self.http.read_body(response, 0)  # the reply comes on the stream
            return
        self.http.status_error(response, message if "id" in message and "method" in message else None, self._deliver_error)

    def close(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._endpoint_ready.set()
        self.http.stop_all()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.http.close_client()

    def diagnostics(self) -> str:
        return "\n".join(self._notes)

    # -- internals ------------------------------------------------------------------------------

    def _deliver_error(self, message: JSONObject) -> None:
        if self._deliver is not None:
            self._deliver(message)

    def _read(self, response: httpx2.Response, deliver: Deliver, closed: Closed) -> None:
        try:
            self._read_events(response, deliver)
        except ProtocolError as exc:  # an event over the message limit: the server is unusable
            self._endpoint_error = self._endpoint_error or (exc if self.endpoint is None else None)
            self._endpoint_ready.set()
            if not self._stopped:
                closed(exc)
            return
        if not self._stopped:
            if self.endpoint is None:
                self._endpoint_error = ConnectionFailed(
                    f"{self.http._where(self.url)} closed the SSE stream before sending its `endpoint` event"
                )
                self._endpoint_ready.set()
                return
            closed(ConnectionFailed("the server closed the SSE stream"))

    def _read_events(self, response: httpx2.Response, deliver: Deliver) -> None:
        for event in self.http.read_events(response):
            if event.event == "endpoint" and self.endpoint is None:
                self._set_endpoint(event.data.strip())
                continue
            if event.event != "message" or not event.data:
                continue
            try:
                messages = jsonrpc.decode(event.data)
            except ProtocolError as exc:
                self._notes.append(f"skipped an event that is no JSON-RPC message: {exc.message}")
                continue
            for message in messages:
                deliver(message)

    def _set_endpoint(self, data: str) -> None:
        endpoint = urljoin(self.url, data)
        if origin(endpoint) != origin(self.url):
            self._endpoint_error = ConnectionFailed(
                f"{self.http._where(self.url)} announced an endpoint on another origin ({origin(endpoint)[1]}): refused"
            )
        else:
            self.endpoint = endpoint
        self._endpoint_ready.set()

"""Streamable HTTP: every message a POST; replies as JSON or as an SSE stream.

Two shapes share this class, chosen by `protocol_version` (set by the session):
- modern (2026-07-28, basic/transports/streamable-http.mdx): each POST carries
  `MCP-Protocol-Version`, `Mcp-Method` and, for tools/call, prompts/get and resources/read,
  `Mcp-Name`; no session id, no standalone GET stream, no DELETE, no resumption. Cancelling a
  request is closing its response stream.
- legacy (2025-03-26 .. 2025-11-25, 2025-11-25 basic/transports.mdx): `Mcp-Session-Id` from the
  initialize reply on every later request, `MCP-Protocol-Version` once negotiated, a standalone
  GET stream for server-initiated messages (405 = not offered), resumable streams (event ids, the
  `retry` field, GET + `Last-Event-ID`), 404 on a request with a session id = session expired,
  DELETE on close.
"""

from __future__ import annotations

import collections
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.errors import (
    Cancelled,
    ConnectionFailed,
    HttpSessionExpired,
    HttpStatusError,
    LlmcError,
    ProtocolError,
    TimeoutExpired,
)
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.inflight import sending_deadline
from llmc_cli.mcp.messages import JSONObject, object_at, request_id
from llmc_cli.mcp.transports.base import AuthHook, Closed, Deliver
from llmc_cli.mcp.transports.http_channel import HttpChannel, is_event_stream, preview, sleep_unless
from llmc_cli.mcp.transports.param_headers import NAME_PARAM, header_value, mirrored_arguments, valid_tools_listing
from llmc_cli.mcp.transports.posting import HEAD_WAIT, WAIT_FOR_ANSWER, Head, Posting, post_workers
from llmc_cli.mcp.versions import MODERN_FROM
from llmc_cli.model import dataclass

if TYPE_CHECKING:
    import httpx2

DEFAULT_RETRY_MS = 1000  # reconnection delay when the server sets none
MAX_RECONNECTS = 5  # resumption attempts per stream
CLOSE_TIMEOUT = 2.0  # DELETE on close, joining reader threads
NOTES_KEPT = 20
# The session may wait longer than `timeout` for a reply (a longer per-call timeout, or progress
# extending the deadline up to 10 timeouts); reads behind it are bounded by that instead, so the
# session's own timeout speaks first and a dead connection still ends.
LONGEST_WAIT_FACTOR = 10
STANDING = "subscriptions/listen"  # a request whose reply stream stays open for the connection's life


@dataclass
class _StreamState:
    last_id: str | None = None
    retry_ms: int = DEFAULT_RETRY_MS


class StreamableHttpTransport:
    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        *,
        auth: AuthHook | None = None,
        connect_timeout: float = 10.0,
        idle_timeout: float | None = None,
        max_reconnects: int = MAX_RECONNECTS,
    ) -> None:
        self.http = HttpChannel(url, headers, timeout, auth, connect_timeout)
        self.url = url
        self.idle_timeout = idle_timeout if idle_timeout is not None else timeout * LONGEST_WAIT_FACTOR
        self.max_reconnects = max_reconnects
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self._session_confirmed = True  # False while a resumed session has had no answer yet
        # False when the session is remembered for the next invocation: closing then leaves it be.
        self.end_session_on_close = True
        self._deliver: Deliver | None = None
        self._closed: Closed | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._inflight: dict[object, httpx2.Response] = {}  # request id -> its open SSE response (modern cancel)
        self._cancelled: set[object] = set()
        self._lock = threading.Lock()
        self._reported = False
        self._notes: collections.deque[str] = collections.deque(maxlen=NOTES_KEPT)
        self._param_headers: dict[str, dict[tuple[str, ...], str]] = {}  # tool -> x-mcp-header paths
        # Set by an owner whose callers each have a thread that only waits for its reply (the
        # gateway's host connections): a request is then posted on that thread (_post_here).
        self.posts_on_caller_thread = False
        self._posting: dict[object, Posting] = {}  # request id -> its POST on the caller's thread

    @property
    def modern(self) -> bool:
        return bool(self.protocol_version and self.protocol_version >= MODERN_FROM)

    # -- Transport ------------------------------------------------------------------------------

    def start(self, deliver: Deliver, closed: Closed) -> None:
        # Nothing to open: HTTP has no connection of its own; the first POST shows what is there.
        self._deliver, self._closed = deliver, closed

    def send(self, message: JSONObject) -> None:
        if self._stop.is_set() or self._deliver is None:
            raise ConnectionFailed("HTTP transport is not open")
        method = message.get("method")
        if self.modern and method == "notifications/cancelled":
            self._cancel(object_at(message, "params").get("requestId"))
            return
        if method == "notifications/cancelled":
            self._abort_posting(object_at(message, "params").get("requestId"))
            # Sent when a request timed out, often because the server hangs: never wait for it.
            post_workers().submit(self._post_quietly, message)
            return
        if method is None or "id" not in message or method in WAIT_FOR_ANSWER:
            self._post(message)
            return
        if method == STANDING and self.modern:
            self._spawn(lambda: self._post_standing(message), "llmc-http-listen")
            return
        # A request: a server may hold the reply's headers back until it is done (the SDK does so
        # for up to seconds), so wait for them only briefly and let the session's own per-request
        # timeout (and cancellation) govern the rest. Failures that come later end the session.
        # A session resumed from an earlier invocation is not known to be alive until the server
        # answers a request with it: wait for that answer's status however long it takes, so a 404
        # (the server forgot the session) reaches the session, which starts a new one, instead of
        # arriving late and ending everything.
        confirming = not self._session_confirmed
        if self.posts_on_caller_thread and not confirming and self.http.direct:
            self._post_here(message)
            return
        head = Head()
        # On a reused thread (a thread start per request is a good part of a fast call's cost).
        # Not joined on close: a POST still waiting for headers cannot be interrupted (no socket to
        # shut down yet); it is a daemon thread bounded by its read timeout.
        post_workers().submit(self._post_in_background, message, head, confirming)
        error = head.wait(self.idle_timeout if confirming else HEAD_WAIT)
        if error is not None:
            raise error

    def _post_in_background(self, message: JSONObject, head: Head, confirming: bool) -> None:
        error: LlmcError | None = None
        try:
            # A reply stream is read right here, once send() has heard that it started.
            self._post(
                message,
                read_timeout=self.idle_timeout,
                on_status=head.settled.set if confirming else None,
                on_stream=lambda: head.settle(None),
                deadline=time.monotonic() + self.idle_timeout,  # the longest a call may wait, progress and all
            )
        except LlmcError as exc:
            error = exc
        finally:
            late = head.settle(error)
        if error is not None and late and not isinstance(error, TimeoutExpired):
            self._report(error)  # a timeout is not reported: the session's own speaks

    def _post_standing(self, message: JSONObject) -> None:
        """A listen stream, on a thread of its own (not a caller's or a shared worker: it is held
        for the connection's life), read with no read timeout (quiet until something changes).
        Ending without a reply, or a failed POST, ends that request alone (an error reply), not
        the connection: an unexpected disconnect, which the client may answer by listening again
        (basic/patterns/subscriptions.mdx)."""
        rid = request_id(message)
        try:
            self._post(message, read_timeout=None, on_stream=lambda: None)
        except LlmcError as exc:
            with self._lock:
                self._inflight.pop(rid, None)
                cancelled = rid in self._cancelled
                self._cancelled.discard(rid)
            if not cancelled and not self._stop.is_set() and self._deliver is not None:
                self._deliver(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"{STANDING} stream ended: {exc.message}"))

    def _post_here(self, message: JSONObject) -> None:
        """POST a request on the calling thread, which would only wait for its reply: no hand-off
        to a worker and back (two thread wake-ups, a noticeable share of a gateway call). The same bounds as
        the session's wait: the reply's head and a JSON body within the request timeout (a
        TimeoutExpired the session answers as its own: a cancel upstream, then the error); a
        stream is read on a worker, each read waiting up to the idle timeout, while the session's
        progress-extended deadline governs it as on the other path. A cancel meanwhile shuts
        the socket down: the wait ends at once, as Cancelled."""
        request_id = message["id"]
        posting = Posting()
        with self._lock:
            self._posting[request_id] = posting
        try:
            # The head and a JSON body by the call's own deadline, however the bytes trickle in.
            self._post(message, watch_socket=posting.watch, stream_on_worker=True, deadline=sending_deadline())
        except LlmcError:
            if posting.aborted:
                raise Cancelled(f"{self.http._where(self.url)}: request {request_id} cancelled") from None
            raise
        finally:
            with self._lock:
                self._posting.pop(request_id, None)

    def _abort_posting(self, request_id: object) -> None:
        with self._lock:
            posting = self._posting.get(request_id)
        if posting is not None:
            posting.abort()

    def _post_quietly(self, message: JSONObject) -> None:
        try:
            self._post(message, read_timeout=CLOSE_TIMEOUT)
        except LlmcError as exc:
            self._note(f"{message.get('method')} not delivered: {exc.message}")

    def _post(
        self,
        message: JSONObject,
        read_timeout: float | str | None = "default",
        on_status: Callable[[], None] | None = None,
        on_stream: Callable[[], object] | None = None,
        watch_socket: Callable[[socket.socket | None], None] | None = None,
        stream_on_worker: bool = False,
        deadline: float | None = None,
    ) -> None:
        """POST one message and handle the reply; `on_status` is called once the server has
        accepted the session (any status but 404), before the body is read. `on_stream`: this
        thread is the request's own, so a reply stream is read here (on_stream called first)
        instead of on a new thread; `stream_on_worker`: on a worker, with the idle timeout."""
        method = message.get("method")
        is_request = method is not None and "id" in message
        sent_session = self.session_id if not self.modern else None
        response = self.http.request(
            "POST",
            self.url,
            self._headers(message),
            body=jsonrpc.encode(message).encode("utf-8"),
            read_timeout=read_timeout,
            watch_socket=watch_socket,
            deadline=deadline,
        )
        status = response.status_code
        if method == "initialize" and 200 <= status < 300:
            self.session_id = response.headers.get("mcp-session-id") or None
            self._session_confirmed = True
        if status == 404 and sent_session:
            self.http.discard(response)
            self.session_id = None
            raise HttpSessionExpired(f"{self.http._where(self.url)}: the server ended the session (HTTP 404)")
        if sent_session and 200 <= status < 300:
            self._session_confirmed = True
        if on_status is not None:
            on_status()
        if not 200 <= status < 300:
            self.http.status_error(response, message if is_request else None, self._deliver)
            return
        if status == 202 or not is_request:
            self.http.read_body(response, 0)
        else:
            self._reply(response, message, on_stream, stream_on_worker, deadline)
        if method == "notifications/initialized" and not self.modern:
            self._spawn(self._listen, "llmc-http-get")

    def resume(self, session_id: str) -> None:
        """Continue a legacy session an earlier process started (after `start`, with the version
        set): its id goes on every request, and the server's own stream is listened to again.
        An id the server no longer knows is answered with 404, which the session handles."""
        self.session_id = session_id
        self._session_confirmed = False
        self._spawn(self._listen, "llmc-http-get")

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self.http.stop_all()
        deadline = time.monotonic() + CLOSE_TIMEOUT
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.session_id and not self.modern and self.end_session_on_close:
            # Tell the server the session is over; 405 means it does not let clients end sessions.
            try:
                self.http.read_body(
                    self.http.request("DELETE", self.url, self._headers(None), read_timeout=CLOSE_TIMEOUT, reauthorize=False), 0
                )
            except LlmcError:
                pass
        self.http.close_client()

    def diagnostics(self) -> str:
        return "\n".join(self._notes)

    # -- internals ------------------------------------------------------------------------------

    def _headers(self, message: JSONObject | None, last_event_id: str | None = None) -> dict[str, str]:
        if message is None:
            headers = {"Accept": "text/event-stream"}
        else:
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if self.modern:
            method = (message or {}).get("method")
            if isinstance(method, str):  # a request or notification (jsonrpc.kind_of: method is a str)
                headers["Mcp-Method"] = header_value(method)
                params = object_at(message, "params") if message is not None else {}
                name = params.get(NAME_PARAM.get(method, ""))
                if isinstance(name, str):
                    headers["Mcp-Name"] = header_value(name)
                arguments = params.get("arguments")
                if method == "tools/call" and isinstance(name, str) and isinstance(arguments, dict):
                    headers.update(mirrored_arguments(self._param_headers.get(name, {}), arguments))
        elif self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    def _reply(
        self,
        response: httpx2.Response,
        request: JSONObject,
        on_stream: Callable[[], object] | None = None,
        stream_on_worker: bool = False,
        deadline: float | None = None,
    ) -> None:
        ctype = response.headers.get("content-type", "").lower()
        with self._lock:
            if request["id"] in self._cancelled:
                self._cancelled.discard(request["id"])
                self.http.discard(response)
                return
        if "text/event-stream" in ctype:
            with self._lock:
                self._inflight[request["id"]] = response
            if on_stream is not None:
                on_stream()
                self._post_stream(response, request)
            elif stream_on_worker:
                self.http.extend_read_timeout(response, self.idle_timeout)
                post_workers().submit(self._post_stream, response, request)
            else:
                self._spawn(lambda: self._post_stream(response, request), "llmc-http-sse")
            return
        body = self.http.read_message(response, deadline)
        if "application/json" not in ctype:
            text = body.decode("utf-8", "replace")
            raise HttpStatusError(
                f"{self.http._where(self.url)} answered {ctype.split(';')[0] or 'no content type'} instead of"
                f" JSON or an event stream"
                + (f": {preview(text, 80)}" if text.strip() and not text.lstrip().startswith("<") else ""),
                response.status_code,
                text,
            )
        for reply in jsonrpc.decode(body):
            self._deliver(self._inspect(reply, request))  # type: ignore[misc]

    def _post_stream(self, response: httpx2.Response, request: JSONObject) -> None:
        try:
            self._post_stream_resuming(response, request)
        except ProtocolError as exc:  # an event over the message limit: the server is unusable
            with self._lock:
                self._inflight.pop(request["id"], None)
            self._report(exc)

    def _post_stream_resuming(self, response: httpx2.Response, request: JSONObject) -> None:
        rid, state = request["id"], _StreamState()
        answered = self._pump(response, request, state)
        attempts = 0
        # Resumption (2025-11-25 Resumability and Redelivery): only a stream that gave event ids,
        # only in the legacy era, after the delay the server asked for.
        while (
            not answered
            and not self._stop.is_set()
            and not self.modern
            and state.last_id is not None
            and attempts < self.max_reconnects
            and rid not in self._cancelled
        ):
            attempts += 1
            if not sleep_unless(self._stop, state.retry_ms / 1000):
                break
            what = f"resuming the stream of {request.get('method')}"
            try:
                resumed = self._get_stream(state, what, read_timeout=self.idle_timeout)
            except LlmcError as exc:
                self._note(f"{what} failed: {exc.message}")
                continue
            if resumed is None:
                break
            answered = self._pump(resumed, request, state)
        with self._lock:
            self._inflight.pop(rid, None)
            cancelled = rid in self._cancelled
            self._cancelled.discard(rid)
        if not answered and not cancelled:
            error = ConnectionFailed(
                f"the server closed the event stream of {request.get('method')} before replying"
                + (f" (resumption failed after {attempts} attempt{'s' if attempts != 1 else ''})" if attempts else "")
            )
            if request.get("method") == STANDING:
                raise error  # that request alone ends (_post_standing)
            self._report(error)

    def _listen(self) -> None:
        """The standalone GET stream: server requests and notifications outside any POST."""
        state, attempts = _StreamState(), 0
        while not self._stop.is_set() and attempts <= self.max_reconnects:
            try:
                # 405: the server offers no such stream; anything else: it does not work, do without.
                response = self._get_stream(state, "standalone GET stream not offered", read_timeout=None, reauthorize=False)
            except LlmcError as exc:
                self._note(f"standalone GET stream: {exc.message}")
                return
            if response is None:
                return
            try:
                self._pump(response, None, state)
            except ProtocolError as exc:  # an event over the message limit: the server is unusable
                self._report(exc)
                return
            if state.last_id is None:
                return  # not resumable: the server ended it on purpose
            attempts += 1
            if not sleep_unless(self._stop, state.retry_ms / 1000):
                return

    def _get_stream(
        self, state: _StreamState, what: str, *, read_timeout: float | None, reauthorize: bool = True
    ) -> httpx2.Response | None:
        """GET the event stream, from after the last event `state` saw (Last-Event-ID). None, noted
        as `what` with the HTTP status, when the reply is no event stream; transport errors raise."""
        response = self.http.request(
            "GET", self.url, self._headers(None, state.last_id), read_timeout=read_timeout, reauthorize=reauthorize
        )
        if is_event_stream(response):
            return response
        self._note(f"{what} (HTTP {response.status_code})")
        self.http.discard(response)
        return None

    def _pump(self, response: httpx2.Response, request: JSONObject | None, state: _StreamState) -> bool:
        """Deliver each message event; True once the reply to `request` was delivered."""
        rid = request_id(request) if request is not None else None
        events = self.http.read_events(response)
        try:
            for event in events:
                if event.id is not None:
                    state.last_id = event.id
                if event.retry is not None:
                    state.retry_ms = event.retry
                if not event.data or event.event != "message":
                    continue  # priming events, keep-alives
                try:
                    messages = jsonrpc.decode(event.data)
                except ProtocolError as exc:
                    self._note(f"skipped an event that is no JSON-RPC message: {exc.message}")
                    continue
                answered = False
                for message in messages:
                    if request is not None:
                        message = self._inspect(message, request)
                    self._deliver(message, related=rid)  # type: ignore[misc]
                    answered = answered or (rid is not None and message.get("id") == rid and "method" not in message)
                if answered:
                    return True
            return False
        finally:
            events.close()

    def _inspect(self, message: JSONObject, request: JSONObject) -> JSONObject:
        if not self.modern:
            return message
        return valid_tools_listing(message, request, self._param_headers, self._note)

    def _cancel(self, request_id: object) -> None:
        with self._lock:
            response = self._inflight.get(request_id)
            self._cancelled.add(request_id)  # a reply whose headers are still to come is dropped
        if response is not None:
            self.http.stop_stream(response)
        self._abort_posting(request_id)  # 2026-07-28: closing the request's connection is its cancel

    def _spawn(self, target: Callable[[], object], name: str) -> None:
        """A thread close() joins (the GET stream, a reply stream read apart from its POST)."""
        t = threading.Thread(target=target, daemon=True, name=name)
        self._threads = [old for old in self._threads if old.is_alive()] + [t]
        t.start()

    def _report(self, error: LlmcError) -> None:
        with self._lock:
            if self._reported or self._stop.is_set():
                return
            self._reported = True
        if self._closed is not None:
            self._closed(error)

    def _note(self, text: str) -> None:
        self._notes.append(text)

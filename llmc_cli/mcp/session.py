"""One MCP client session over any transport: era and version negotiation, requests with
timeouts and cancellation, notifications, server->client requests, pagination. The requests
awaiting replies, and their progress-extended deadlines, are kept by mcp/inflight.py.

The session never knows which transport it runs on. Two eras exist (2026-07-28 basic/versioning):
- legacy (2024-11-05 .. 2025-11-25): an `initialize` handshake fixes the version for the session;
  the server may send requests (ping, roots/list, elicitation/create, sampling/createMessage).
- modern (2026-07-28): no handshake; every request carries `_meta` with the protocol version,
  client info and capabilities; server->client requests arrive as `input_required` results
  (multi round-trip requests) that the client fulfils and retries.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from llmc_cli import __version__
from llmc_cli.errors import Cancelled, ConnectionFailed, HttpSessionExpired, LlmcError, ProtocolError, RpcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc, observe
from llmc_cli.mcp.hooks import RELATED_TOKENS, ClientHooks, answer_request, notified, with_input_responses
from llmc_cli.mcp.inflight import AFTER_SEND, SENDING, DeadlinePassed, Future, InFlight
from llmc_cli.mcp.messages import ProgressToken, all_pages, object_at
from llmc_cli.mcp.transports.base import Transport
from llmc_cli.mcp.versions import LEGACY_VERSIONS, META_PREFIX, MODERN_VERSIONS, SUPPORTED_VERSIONS, retry_version
from llmc_cli.model import EVERYTHING, JSON, JSONObject

CLIENT_INFO: JSONObject = {"name": "llmc", "version": __version__}
MAX_INPUT_ROUNDS = 8  # input_required round trips for one request
_UNTOKENED = ("initialize", "server/discover", "ping")  # requests sent without a progress token


class NotADiscoverResult(ProtocolError):
    """`server/discover` got a result that is no DiscoverResult: a legacy server answering loosely."""


def _string_or_none(value: JSON) -> str | None:
    return value if isinstance(value, str) else None


def _token(value: JSON) -> ProgressToken | None:
    """A progress token as JSON-RPC allows one (a string or an integer), else None."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


class ClientSession:
    """A connected session. Thread-safe: several threads may send requests concurrently."""

    def __init__(
        self, transport: Transport, *, name: str = "server", timeout: float = 60.0, hooks: ClientHooks | None = None
    ) -> None:
        self.transport = transport
        self._pump = getattr(transport, "pump", None)  # stdio's: the caller reads its own reply (inflight.Pump)
        self._write: Callable[[JSONObject, object], None] = transport.send  # type: ignore[assignment]  # stdio's, when _pump
        self.name = name
        self.timeout = timeout
        self.handshake_timeout: float | None = None  # initialize / server/discover (None: `timeout`)
        self._unanswered = False  # an adopted era: nothing answered yet
        self.hooks = hooks or ClientHooks()
        self.era: str | None = None  # "legacy" | "modern"
        self.protocol_version: str | None = None
        self.server_info: JSONObject = {}
        self.capabilities: JSONObject = {}
        self.instructions: str | None = None
        self._ids = itertools.count(1)
        self._last_id = 0  # the highest id sent so far: a reply to a higher one answers nothing sent
        self._inflight = InFlight()
        self._alone = self._inflight.alone  # (pump's, bound once: not a method object made a request)
        self._closed_error: LlmcError | None = None
        self._started = False
        self._born = time.monotonic()
        self._reinitialized = False  # an expired HTTP session is initialized again once
        # Called after every completed handshake, the one after an expired HTTP session included
        # (the client remembers the new session id for the next invocation).
        self.on_initialized: Callable[[], None] | None = None

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        if not self._started:
            self.transport.start(self._on_message, self._on_closed)
            self._started = True

    def initialize(self, version: str = LEGACY_VERSIONS[0]) -> JSONObject:
        """The legacy handshake. Raises ProtocolError when no common version exists."""
        self.start()
        result = self._request_raw(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": self._capabilities(legacy_version=version),
                "clientInfo": CLIENT_INFO,
            },
            self.handshake_timeout,
        )
        agreed = result.get("protocolVersion")
        if not isinstance(agreed, str) or not isinstance(result.get("capabilities", {}), dict):
            raise ProtocolError(f"{self.name}: invalid initialize result (no protocolVersion)")
        if agreed not in LEGACY_VERSIONS:
            raise ProtocolError(f"{self.name}: server speaks MCP {agreed}; llmc supports {', '.join(SUPPORTED_VERSIONS)}")
        self.era, self.protocol_version = "legacy", agreed
        self.transport.protocol_version = agreed
        self.server_info = object_at(result, "serverInfo")
        self.capabilities = object_at(result, "capabilities")
        self.instructions = _string_or_none(result.get("instructions"))
        self.notify("notifications/initialized")
        if self.on_initialized:
            self.on_initialized()
        return result

    def discover(self, version: str = MODERN_VERSIONS[0], timeout: float | None = None) -> JSONObject:
        """The modern era's `server/discover`. Adopts a version both sides support.

        Raises RpcError for any error reply; the caller decides what it means for the era."""
        self.start()
        self.era, self.protocol_version = "modern", version
        self.transport.protocol_version = version
        try:
            result = self.request("server/discover", {}, timeout=timeout or self.handshake_timeout)  # one version retry inside
        except LlmcError:
            self.era = self.protocol_version = self.transport.protocol_version = None
            raise
        versions = result.get("supportedVersions")
        if not isinstance(versions, list):
            # Not a DiscoverResult: a legacy server answering an unknown method loosely.
            self.era = self.protocol_version = self.transport.protocol_version = None
            raise NotADiscoverResult(f"{self.name}: invalid server/discover result (no supportedVersions)")
        if version not in versions:
            common = [v for v in MODERN_VERSIONS if v in versions]
            if not common:
                raise ProtocolError(
                    f"{self.name}: server supports MCP {', '.join(map(str, versions))}; "
                    f"llmc supports {', '.join(SUPPORTED_VERSIONS)}"
                )
            self.protocol_version = self.transport.protocol_version = common[0]
        self.server_info = object_at(object_at(result, "_meta"), META_PREFIX + "serverInfo")
        self.capabilities = object_at(result, "capabilities")
        self.instructions = _string_or_none(result.get("instructions"))
        return result

    def adopt(self, era: str, version: str) -> None:
        """Continue with an era and version known from a previous run (no probe, no handshake
        for modern servers; legacy servers still need `initialize`)."""
        self.start()
        self.era, self.protocol_version = era, version
        self.transport.protocol_version = version
        self._unanswered = True  # the first request also waits for the server to start

    def close(self) -> None:
        # Requests still waiting (other threads' calls when the command was interrupted, or
        # calls abandoned at a time limit) are cancelled before the connection goes.
        for request_id in self._inflight.ids():
            self._cancel(request_id, "the client closed the session")
        try:
            self.transport.close()
        finally:
            self._inflight.fail_all(ConnectionFailed(f"{self.name}: session closed"))
            if observe.OBSERVER is not None and self._started:
                observe.OBSERVER.session_ended(self, time.monotonic() - self._born)

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------

    def request(self, method: str, params: JSONObject | None = None, *, timeout: float | None = None) -> JSONObject:
        """Send a request and wait for its result; fulfils `input_required` rounds (modern)."""
        params = params or {}  # not changed here: each round makes its own
        result = self._request_raw(method, params, timeout)
        return result if result.get("resultType") != "input_required" else self._rounds(method, params, result, timeout)

    def _rounds(self, method: str, params: JSONObject, result: JSONObject, timeout: float | None) -> JSONObject:
        """The request sent again with the answers to the `input_required` result it got, until
        it gets another result, MAX_INPUT_ROUNDS requests in all."""
        for _ in range(MAX_INPUT_ROUNDS - 1):
            params = with_input_responses(self.hooks, params, result)
            result = self._request_raw(method, params, timeout)
            if result.get("resultType") != "input_required":
                return result
        with_input_responses(self.hooks, params, result)  # answered, as every round's (then given up)
        raise ProtocolError(f"{self.name}: {method} still needs input after {MAX_INPUT_ROUNDS} rounds")

    def forward(self, message: JSONObject, *, standing: bool = False) -> tuple[int, Future[JSONObject]]:
        """Relay a request that another client wrote (the session keeper does this): it goes out
        as it is, `_meta` included, under a fresh id of this session. The future completes with
        the raw reply (result or error object, still carrying that fresh id), or fails with the
        error that closed the session. Waiting and timeouts are the original client's business.
        `standing`: a long-lived request such as a `subscriptions/listen` stream (mcp/inflight.py:
        no wait, so the session stays idle), cancelled when the session closes."""
        if self._closed_error is not None:
            raise self._closed_error
        request_id = next(self._ids)
        self._last_id = max(self._last_id, request_id)
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        # the relay's own progress token: server->client messages are tied to it (mcp/router.py)
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        token = token if isinstance(token, (str, int)) else None
        future = self._inflight.open(request_id, timed=False, token=token, standing=standing)  # the caller keeps the time
        future.add_done_callback(lambda _: self.abandon(request_id))
        try:
            self._send_request({**message, "id": request_id})
        except BaseException:
            self.abandon(request_id)
            raise
        return request_id, future

    def abandon(self, request_id: int) -> None:
        """Stop waiting for a reply (a late one is then dropped)."""
        self._inflight.close(request_id)

    def withdraw(self, request_id: int, reason: str) -> None:
        """Cancel a relayed request (`forward`) whose caller cancelled it or went away: the server
        is told, a late reply is dropped, and its future is never completed."""
        self.abandon(request_id)
        self._cancel(request_id, reason)

    def busy(self) -> bool:
        """Whether a request is waiting for its reply (a standing one is no wait)."""
        return bool(self._inflight.waited())

    @property
    def closed_error(self) -> LlmcError | None:
        """Why the connection ended, or None while it is open."""
        return self._closed_error

    def notify(self, method: str, params: JSONObject | None = None) -> None:
        self.transport.send(jsonrpc.notification(method, params))

    def list_all(self, method: str, key: str, params: JSONObject | None = None) -> list[JSONObject]:
        return self.list_pages(method, key, params)[0]

    def list_pages(self, method: str, key: str, params: JSONObject | None = None) -> tuple[list[JSONObject], float | None]:
        """Every page of a list method, and the seconds the list stays fresh (messages.all_pages)."""
        return all_pages(self.request, self.name, method, key, params, self.era == "modern")

    def list_tools(self) -> list[JSONObject]:
        return self.list_tools_fresh()[0]

    def list_tools_fresh(self) -> tuple[list[JSONObject], float | None]:  # and the seconds they stay fresh
        return self.list_pages("tools/list", "tools")

    def call_tool(
        self, name: str, arguments: JSONObject, *, timeout: float | None = None, meta: JSONObject | None = None
    ) -> JSONObject:
        """`meta`: the request's _meta, as a caller relays it (the gateway: the host's progress
        token, mapped to one of its own)."""
        params: JSONObject = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        result = self._request_raw("tools/call", params, timeout)  # request()'s, a call less (a batch's every call)
        return result if result.get("resultType") != "input_required" else self._rounds("tools/call", params, result, timeout)

    def cancel(self, progress_token: object, reason: str) -> None:
        """Withdraw the request that was sent with this progress token (a cancellation the
        caller's own client sent): the server is told, the waiting caller gets Cancelled."""
        request_id, future = self._inflight.by_token(progress_token)
        if request_id is None:
            return
        self._cancel(request_id, reason)
        if future is not None and not future.done():
            future.set_exception(Cancelled(f"{self.name}: cancelled: {reason}"))

    def ping(self) -> None:
        """A liveness round trip. 2026-07-28 removed `ping`; `server/discover` serves instead."""
        self.request("server/discover" if self.era == "modern" else "ping")

    # -- internals -------------------------------------------------------------------------------

    def _capabilities(self, legacy_version: str | None = None) -> JSONObject:
        caps: JSONObject = {"roots": {"listChanged": False}}
        if legacy_version in ("2024-11-05",):
            caps.pop("roots")
        if self.hooks.elicit is not None and legacy_version != "2024-11-05":
            caps["elicitation"] = {"form": {}} if legacy_version in (None, "2025-11-25") else {}
        if self.hooks.sample is not None:
            caps["sampling"] = {}
        return caps

    def modern_meta(self) -> JSONObject:
        """What every request of the modern era carries in `_meta` (a relayed one too)."""
        meta: JSONObject = {
            META_PREFIX + "protocolVersion": self.protocol_version,
            META_PREFIX + "clientInfo": CLIENT_INFO,
            META_PREFIX + "clientCapabilities": self._capabilities(),
        }
        if self.hooks.on_log is not None:  # modern servers log only when a request opts in
            meta[META_PREFIX + "logLevel"] = "info"
        return meta

    def _dress(
        self, sent: JSONObject, given: JSON, method: str, request_id: int
    ) -> tuple[ProgressToken | None, observe.RequestWatch | None]:
        """`sent`'s _meta as a request carries it (the caller's, the era's, the progress token, the
        observer's); the caller's own progress token and the observer's watch."""
        meta = given.copy() if isinstance(given, dict) else {}
        if self.era == "modern":
            meta.update(self.modern_meta())
        own_token = meta.get("progressToken")  # the caller's: progress is relayed, not shown here
        if "progressToken" not in meta and method not in _UNTOKENED:
            # Always asked for, shown or not: progress is what extends a slow request's
            # deadline, so a call that works on a terminal works the same in cron.
            meta["progressToken"] = request_id
        watch = observe.OBSERVER.request(self, request_id, method, sent) if observe.OBSERVER else None
        if watch is not None:
            meta.update(watch.meta())
        if meta:
            sent["_meta"] = meta
        return None if own_token is None else _token(own_token), watch

    def _request_raw(
        self, method: str, params: JSONObject | None, timeout: float | None = None, retried: bool = False
    ) -> JSONObject:
        """One request; a modern server that refuses its version (UnsupportedProtocolVersion)
        listing one llmc speaks gets one retry with the best common version (basic/versioning).
        The first request of an era adopted without a handshake is the first the server answers,
        so it may wait as long as a handshake would. (One function with its retry: a batch's.)"""
        if self._closed_error is not None:
            raise self._closed_error
        if self._unanswered and self.handshake_timeout and not retried:
            timeout = max(timeout or self.timeout, self.handshake_timeout)
        request_id = next(self._ids)  # (as forward's)
        if request_id > self._last_id:
            self._last_id = request_id
        sent = params.copy() if params else {}  # `params` stays as given: a retry sends it again (copy: no type's call)
        given = sent.get("_meta")
        if given is None and self.era != "modern" and observe.OBSERVER is None:  # most requests: a token is all their _meta
            own_token = watch = None
            if method not in _UNTOKENED:
                sent["_meta"] = {"progressToken": request_id}
        else:
            own_token, watch = self._dress(sent, given, method, request_id)
        started = time.monotonic()  # (the deadline counts from here, open's included: one clock read)
        future = self._inflight.open(request_id, token=own_token, at=started)
        result: JSONObject | None = None
        error: BaseException | None = None
        limit = timeout if timeout is not None else self.timeout
        try:
            message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}  # jsonrpc.request's
            if sent:
                message["params"] = sent
            if self._pump is not None:  # stdio: send() only writes, never waits for the reply:
                # no deadline to hand it (three thread-local lookups a call), no HTTP session to renew;
                # a call's arguments are all that came from outside unless _meta did (compact_json_line)
                self._write(message, sent.get("arguments") if given is None and method == "tools/call" else EVERYTHING)
            else:
                self._send_by(message, started + limit, limit)
            after = AFTER_SEND.call
            if after is not None:
                AFTER_SEND.call = None
                after()
            try:  # stdio: a lone caller reads its own reply on this thread, handed back as it is (pump's `own`)
                got = self._pump(future, limit if limit < 0.5 else 0.5, self._alone, request_id) if self._pump else None
            except KeyboardInterrupt:  # (as _wait's: the main thread only, where pump reads nothing)
                self._cancel(request_id, "interrupted by the user")
                raise
            result = got.get("result") if type(got) is dict and "error" not in got else None
            if type(result) is not dict:  # an error, no object, or no reply read yet: _wait says what
                result = self._wait(request_id, future, method, limit, started, got)
            self._unanswered = self._unanswered and retried  # answered (a retry's answer left it as it was)
            return result
        except RpcError as exc:
            error = exc
            version = not retried and self.era == "modern" and retry_version(exc)
            if not version:
                raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if watch is not None:
                watch.finish(result, error)
            self._inflight.close(request_id)
        self.protocol_version = self.transport.protocol_version = version
        return self._request_raw(method, params, timeout, True)

    def _send_by(self, message: JSONObject, deadline: float, limit: float) -> None:
        """Send a request on a transport that may wait for its reply in send() (HTTP posting on
        the caller's thread), by the request's deadline, however the reply's bytes arrive."""
        # (sending_deadline() and set_sending_deadline(), without three calls a request); the
        # outer one: a request sent while sending another (a new session's initialize)
        outer = getattr(SENDING, "deadline", None)
        SENDING.deadline = deadline
        try:
            self._send_request(message)
        except TimeoutExpired:
            # It ran out of the time the wait for the reply would have given: the same ending.
            method = message["method"]
            if method in ("initialize", "server/discover"):
                raise  # not a request a client may cancel (lifecycle)
            self._cancel(message["id"], "timeout")  # type: ignore[arg-type]  # an id this session made
            raise TimeoutExpired(f"{self.name}: no reply to {method} within {limit:g}s") from None
        finally:
            SENDING.deadline = outer

    def _send_request(self, message: JSONObject) -> None:
        try:
            self.transport.send(message)
        except HttpSessionExpired:
            # 2025-11-25 transports, Session Management: start a new session, then send again.
            if self.era != "legacy" or message["method"] == "initialize" or self._reinitialized:
                raise
            self._reinitialized = True
            self.initialize(self.protocol_version or LEGACY_VERSIONS[0])
            if self.hooks.on_notice:
                self.hooks.on_notice(
                    f"{self.name}: the server ended the HTTP session; a new one was started, "
                    "so state kept by the server (handles, processes, ids) is lost"
                )
            self.transport.send(message)

    def _wait(
        self, request_id: int, future: Future[JSONObject], method: str, timeout: float, started: float, got: object
    ) -> JSONObject:
        """The result of `got` (the reply stdio's pump read), else of the matcher's; or its error."""
        try:
            message = got if type(got) is dict else self._inflight.wait(request_id, future, timeout, started, self._pump)
        except DeadlinePassed:
            self._cancel(request_id, "timeout")
            raise TimeoutExpired(f"{self.name}: no reply to {method} within {timeout:g}s") from None
        except KeyboardInterrupt:
            self._cancel(request_id, "interrupted by the user")
            raise
        if "error" in message:
            err = object_at(message, "error")  # an object: jsonrpc.kind_of said "error"
            code = err.get("code", 0)
            raise RpcError(
                f"{self.name}: {method} failed: {err.get('message', 'error')} (code {err.get('code')})",
                code=code if isinstance(code, int) else 0,
                data=err.get("data"),
            )
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"{self.name}: {method} result is not an object")
        return result

    def _cancel(self, request_id: int | str, reason: str) -> None:
        try:
            self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
        except LlmcError:
            pass

    def _on_message(self, message: JSONObject, related: int | str | None = None) -> None:
        # a reply with a result (what kind_of says "response" of, without its call: one a request)
        reply = type(message) is dict and "result" in message and "id" in message and "method" not in message
        kind = "response" if reply and message.get("jsonrpc") == "2.0" else jsonrpc.kind_of(message)
        if kind in ("response", "error"):
            if not self._inflight.resolve(message):
                self._inflight.unmatched(message, self._last_id, self.name)
            return
        method, params = str(message["method"]), object_at(message, "params")  # kind_of: method is a str
        owners = self._owners(method, params, related)
        if kind == "request":
            threading.Thread(target=self._serve_request, args=(message, owners), daemon=True, name="llmc-server-request").start()
            return
        reset = RELATED_TOKENS.set(owners)
        try:
            self._on_notification(method, params)
        finally:
            RELATED_TOKENS.reset(reset)

    def _owners(self, method: str, params: JSONObject, related: int | str | None) -> tuple[ProgressToken | None, ...]:
        """Which requests in flight a server's message may belong to (hooks.RELATED_TOKENS):
        progress names its request by token; a message on a request's own HTTP stream belongs to
        that request; one without either tie (stdio, the standalone GET stream) may belong to any
        request in flight."""
        if method == "notifications/progress":
            token = _token(params.get("progressToken"))
            if token is None or self._inflight.by_token(token)[0] is None:
                return ()
            # on a request's own stream it may only be about that request (transports: MUST relate)
            return (token,) if related is None or self._inflight.owners(related) == (token,) else ()
        return self._inflight.owners(related)

    def _on_notification(self, method: str, params: JSONObject) -> None:
        if method == "notifications/progress":
            self._inflight.progressed(params.get("progressToken"))
        notified(self.hooks, self.name, method, params)

    def _serve_request(self, message: JSONObject, owners: tuple[ProgressToken | None, ...]) -> None:
        RELATED_TOKENS.set(owners)  # a thread of its own: its context ends with it
        reply = answer_request(self.hooks, message)
        try:
            self.transport.send(reply)
        except LlmcError:
            pass

    def _on_closed(self, error: LlmcError | None) -> None:
        if error is None:
            error = ConnectionFailed(f"{self.name}: server closed the connection")
        elif not error.message.startswith(self.name + ":"):
            error.message = f"{self.name}: {error.message}"
            error.args = (error.message,)
        self._closed_error = error
        self._inflight.fail_all(error)

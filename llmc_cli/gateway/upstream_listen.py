"""The gateway's listen stream to one 2026-07-28 upstream connection (basic/patterns/subscriptions.mdx):
that era announces list changes and resource updates only on a `subscriptions/listen` stream the
client opens (the older era's came unasked, on stdio or the GET stream, and resources/subscribe
asked for updates). The stream is a standing request (mcp/inflight.py): no caller waits on it, so
calls beside it still read their own replies and a connection with only it open is idle (the
gateway reclaims it; it ends with the connection, and the next connection listens again).

What arrives reaches the session's hooks like any notification, and so the hosts through the same
fan-out as an initialize-era upstream's (gateway/subscribers.py). A stream's filter is fixed when
it opens: when the resources hosts watch change, a new stream opens, and the old one is withdrawn
once the new one is acknowledged (nothing is missed meanwhile; a change both hear reaches a host
twice, which only makes it read again)."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from llmc_cli.errors import LlmcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.versions import META_PREFIX
from llmc_cli.model import JSONObject

if TYPE_CHECKING:
    from llmc_cli.mcp.inflight import Future
    from llmc_cli.mcp.session import ClientSession

LISTEN_WAIT = 10.0  # seconds a changed stream waits for its acknowledgment
FILTER = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}


class UpstreamListen:
    """One upstream connection's listen stream: the lists the server may announce changes of, and
    the resources hosts watch through this connection."""

    def __init__(self, session: ClientSession) -> None:
        self._session = weakref.ref(session)  # not kept alive by its listen (gateway/subscribers.py)
        known = session.capabilities  # {} for a connection adopted from the era cache: no server/discover
        # What it declares listChanged for; every list when nothing is known (the acknowledgment
        # then says which it honours).
        self.lists: JSONObject = {
            flag: True
            for capability, flag in FILTER.items()
            if not known or object_at(known, capability).get("listChanged") is True
        }
        self.offers_updates = not known or object_at(known, "resources").get("subscribe") is True
        self.current: int | None = None  # the open stream's request id
        self._acknowledged: dict[object, JSONObject] = {}  # subscription id -> the filter it honours
        self._heard = threading.Condition()
        self._changing = threading.Lock()  # one new stream at a time
        self._told = session.hooks.on_acknowledged  # who else hears of acknowledgments
        session.hooks = replace(session.hooks, on_acknowledged=self._acknowledge)

    def open(self, watched: Callable[[], list[str]], *, wait: bool = True) -> list[str]:
        """Listen for the lists and the URIs `watched()` says (asked once no other stream is being
        opened, so the last one opened holds every URI), replacing the open stream; with `wait`,
        until the server acknowledged it: the URIs it honours (none when it refused, or said
        nothing)."""
        session = self._session()
        if session is None:
            return []
        with self._changing:
            wanted: JSONObject = dict(self.lists)
            if uris := watched():
                wanted["resourceSubscriptions"] = list(uris)
            old = self.current
            if not wanted:  # nothing left to hear
                self.current = None
                self._withdraw(old)
                return []
            params: JSONObject = {"_meta": session.modern_meta(), "notifications": wanted}
            try:
                listen_id, future = session.forward(jsonrpc.request(0, "subscriptions/listen", params), standing=True)
            except LlmcError:
                return []  # the connection ended: its next one listens again
            if not wait:
                self.current = listen_id
                self._withdraw(old)
                with self._heard:
                    self._acknowledged.pop(listen_id, None)  # come already: nobody waits for it
                return []
            honored = self._wait(listen_id, future)
            if honored is None:  # refused, or no acknowledgment in time: the old stream stays
                self._withdraw(listen_id)
                return []
            self.current = listen_id
            self._withdraw(old)
        subscribed = honored.get("resourceSubscriptions")
        return [uri for uri in subscribed if isinstance(uri, str)] if isinstance(subscribed, list) else []

    def _wait(self, listen_id: int, future: Future[JSONObject]) -> JSONObject | None:
        deadline = time.monotonic() + LISTEN_WAIT
        with self._heard:
            while listen_id not in self._acknowledged and not future.done() and (left := deadline - time.monotonic()) > 0:
                self._heard.wait(min(left, 0.1))  # polled: a refusal completes the future, not the condition
            honored = self._acknowledged.pop(listen_id, None)
            self._acknowledged.clear()  # late ones of streams withdrawn meanwhile
            return honored

    def _withdraw(self, listen_id: int | None) -> None:
        session = self._session()
        if listen_id is not None and session is not None:
            session.withdraw(listen_id, "the gateway's subscriptions changed")
            with self._heard:
                self._acknowledged.pop(listen_id, None)

    def _acknowledge(self, params: JSONObject) -> None:
        """notifications/subscriptions/acknowledged: what the stream it names honours."""
        subscription = object_at(params, "_meta").get(META_PREFIX + "subscriptionId")
        with self._heard:
            if subscription is not None and subscription != self.current:  # the open one's is not waited for
                self._acknowledged[subscription] = object_at(params, "notifications")
                self._heard.notify_all()
        if self._told is not None:
            self._told(params)

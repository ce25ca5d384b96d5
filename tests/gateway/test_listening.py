"""gateway/listening.py in process: a 2026-07-28 listen stream ends with its `complete` result
whenever its connection closes (subscriptions.mdx, Graceful Closure) — also when the close (the
gateway stopping on SIGTERM) lands while the listen is being opened."""

from __future__ import annotations

import threading
from typing import Any, cast

from llmc_cli.gateway.listening import Subscriptions
from llmc_cli.mcp.messages import JSONObject

LISTEN = {"notifications": {"toolsListChanged": True}}


def kinds(sent: list[JSONObject]) -> list[str]:
    return [str(m.get("method") or cast(JSONObject, m["result"])["resultType"]) for m in sent]


def test_a_close_between_the_acknowledgment_and_the_registration_still_completes_the_listen() -> None:
    subscriptions = Subscriptions(cast(Any, None))  # no resource URIs asked: the connection is not used
    sent: list[JSONObject] = []
    closers: list[threading.Thread] = []

    def send(message: JSONObject) -> None:
        sent.append(message)
        if not closers:  # the acknowledgment is out: the gateway stops now, from its signal thread
            closer = threading.Thread(target=subscriptions.close)
            closers.append(closer)
            closer.start()
            closer.join(0.2)  # it ran to the end here before the fix, finding no listen to complete

    subscriptions.listen("L1", LISTEN, send)
    closers[0].join(10)
    assert not closers[0].is_alive()
    assert kinds(sent) == ["notifications/subscriptions/acknowledged", "complete"]
    assert sent[1]["id"] == "L1"


def test_a_listen_opened_after_the_close_is_acknowledged_and_completed_at_once() -> None:
    subscriptions = Subscriptions(cast(Any, None))
    subscriptions.close()
    sent: list[JSONObject] = []
    subscriptions.listen(7, LISTEN, sent.append)
    assert kinds(sent) == ["notifications/subscriptions/acknowledged", "complete"]
    assert subscriptions.listens == {}


def test_close_completes_every_open_listen_once() -> None:
    subscriptions = Subscriptions(cast(Any, None))
    sent: list[JSONObject] = []
    subscriptions.listen("a", LISTEN, sent.append)
    subscriptions.listen("b", LISTEN, sent.append)
    subscriptions.close()
    subscriptions.close()
    assert sorted(str(m["id"]) for m in sent if "result" in m) == ["a", "b"]

"""An initialize-era host session as plain data: its connection, who opened it and what it said
it is (clientInfo, protocol version), how far it got (handshake only, listing, working) and so
how soon it expires idle, its GET stream's queue and its resumable call streams. And the rules
for making room: which session ends when a principal or the gateway is full."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from llmc_cli.gateway.admission import Refused
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal
from llmc_cli.mcp.messages import JSONObject, RequestId

MAX_SESSIONS = 256  # the gateway's; each principal's own is smaller (principals.MAX_SESSIONS)
MAX_RESUMABLE = 16  # a session's newest call streams that a host may resume (Last-Event-ID)
# How long a session may sit unused, as a share of --idle-timeout, by how far it got: one that
# never got past initialize (a probe, a bridge's abandoned start) goes first, one that only
# listed next; one that called a tool, read a resource or got a prompt keeps the whole timeout.
UNSTARTED_SHARE = 1 / 30  # 60 s of the default 30 min
LISTED_SHARE = 1 / 6  # 5 min
WORK = {"tools/call", "resources/read", "prompts/get", "completion/complete", "resources/subscribe"}
CANCELLED: JSONObject = {}  # put in a request's reply queue: the host cancelled it, no reply comes
_labels = itertools.count(1)


class Waiting(Protocol):
    """Where a request's replies go while it is answered (inline.InlineReply)."""

    def put(self, message: JSONObject) -> None: ...


@dataclass
class ResumableStream:
    """A tools/call's SSE stream in a session: every event it carried (event k is events[k-1], its
    id `STREAM-k`), and the replies still to come. Whoever owns it (the POST that opened it, or the
    GET that resumed it) writes the events; a host whose stream broke resumes it with GET and
    Last-Event-ID, and the call goes on meanwhile (initialize era: a broken stream is no cancel)."""

    msg_id: RequestId | None
    replies: queue.SimpleQueue[JSONObject]
    events: list[JSONObject] = field(default_factory=list)
    owner: int = 0  # the thread writing it now
    done: bool = False  # its final reply is among the events (or it was cancelled)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class HostSession:
    connection: GatewayConnection  # its upstreams: its principal's, and its own to per_session servers
    principal: str | None
    last_used: float = field(default_factory=time.monotonic)
    stream: queue.Queue[JSONObject | None] | None = None  # the GET stream's messages
    last_shared: float = field(default_factory=time.monotonic)  # when the shared store last saw it used
    shared: bool = False  # in the shared store (saved after its initialize, or resumed from it)
    streams: dict[str, ResumableStream] = field(default_factory=dict)  # stream id -> stream, oldest first
    requests: int = 0  # POSTs of it being answered now
    stage: str = "unstarted"  # unstarted (initialize only), listed (no work yet), working
    opened: float = field(default_factory=time.time)
    label: str = field(default_factory=lambda: f"#{next(_labels)}")  # for logs: the id itself is a secret
    waiting: dict[RequestId, Waiting] = field(default_factory=dict)  # requests answered now

    def keep_stream(self, stream_id: str, stream: ResumableStream) -> None:
        self.streams[stream_id] = stream
        while len(self.streams) > MAX_RESUMABLE:
            del self.streams[next(iter(self.streams))]

    def saw(self, method: object) -> None:
        """A request of the session arrived (after initialize's; None: a notification or a
        reply): how far it got. The handshake's own notification and pings do not count."""
        self.last_used = time.monotonic()
        if method in WORK:
            self.stage = "working"
        elif self.stage == "unstarted" and method not in (None, "ping"):
            self.stage = "listed"

    def idle_limit(self, idle_seconds: float) -> float:
        """How long it may sit unused before it ends."""
        share = {"unstarted": UNSTARTED_SHARE, "listed": LISTED_SHARE}.get(self.stage, 1.0)
        return idle_seconds * share

    def cancel(self, msg_id: object) -> bool:
        """The host cancelled its request `msg_id` (notifications/cancelled): the response still
        open for it ends now, without a reply (cancellation.mdx), and stops counting against the
        principal's max_requests."""
        replies = self.waiting.get(msg_id) if isinstance(msg_id, (int, str)) else None
        if replies is None:
            return False
        replies.put(CANCELLED)
        return True

    def send(self, message: JSONObject) -> None:
        """A message that answers no request, to the GET stream (none open: nobody listens)."""
        stream = self.stream
        if stream is not None:
            stream.put(message)

    def describe(self, now: float) -> JSONObject:
        """What /status says of it: never its id."""
        info = self.connection.client_info
        return {
            "session": self.label,
            "principal": self.principal,
            "client": {"name": str(info.get("name", ""))[:200], "version": str(info.get("version", ""))[:100]},
            "protocolVersion": self.connection.legacy_version,
            "stage": self.stage,
            "listening": self.stream is not None,
            "opened": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.opened)),
            "idleSeconds": round(now - self.last_used, 1),
        }


def room_for(sessions: dict[str, HostSession], principal: Principal | None) -> str | None:
    """Called with the sessions' lock held, before a session of `principal` is added: the session
    to end for it, or None. Within its max_sessions it gets one while the gateway has room; when
    the gateway is full, the principal holding the most sessions (more than this one will) gives
    up one, so nobody crowds the others out; at its own max_sessions one of its own ends.
    Refused (raised): every session there is answering a request."""
    name = principal.name if principal else None
    quota = principal.max_sessions if principal else MAX_SESSIONS
    held: dict[str | None, list[str]] = {}
    for session_id, session in sessions.items():
        held.setdefault(session.principal, []).append(session_id)
    mine = held.get(name, [])
    if len(mine) >= quota:
        victim = first_to_end(sessions, mine)
        if victim is None:
            raise Refused(
                429,
                f"Too Many Requests: principal {name} has {quota} sessions (its max_sessions), "
                "each answering a request; end one (DELETE) or try again later",
            )
        return victim
    if len(sessions) < MAX_SESSIONS:
        return None
    for other in sorted(held, key=lambda p: len(held[p]), reverse=True):
        if len(held[other]) <= len(mine) + 1:
            break
        victim = first_to_end(sessions, held[other])
        if victim is not None:
            return victim
    raise Refused(503, "Service Unavailable: too many sessions; try again later")


def first_to_end(sessions: dict[str, HostSession], session_ids: list[str]) -> str | None:
    """The session to end for room: one that never got past initialize first, then the least
    recently used of those with no stream open, else of those whose host only listens on its GET
    stream; never one answering a request."""
    idle = [session_id for session_id in session_ids if not sessions[session_id].requests]
    return min(
        idle,
        key=lambda sid: (sessions[sid].stage != "unstarted", sessions[sid].stream is not None, sessions[sid].last_used),
        default=None,
    )


class HostLog:
    """What `llmc serve -v` says of hosts: each session as it opens (principal, clientInfo,
    protocol version) and ends (why), and each 2026-07-28 host the first time it is seen."""

    SEEN = 1024  # distinct 2026-07-28 hosts remembered (then the oldest are said again)

    def __init__(self, note: Callable[[str], None] | None) -> None:
        self.note = note
        self._seen: dict[tuple[object, ...], None] = {}
        self._lock = threading.Lock()

    def opened(self, session: HostSession) -> None:
        if self.note is not None:
            info = session.connection.client_info
            self.note(
                f"host session {session.label} opened: client {_client(info)}, protocol "
                f"{session.connection.legacy_version}, {_who(session.principal)}"
            )

    def ended(self, session: HostSession, why: str) -> None:
        if self.note is not None:
            self.note(f"host session {session.label} ended ({why}): client {_client(session.connection.client_info)}")

    def request(self, principal: str | None, meta: JSONObject, version: str) -> None:
        """A 2026-07-28 request: said the first time its host (principal, clientInfo) is seen."""
        if self.note is None:
            return
        info = meta.get("io.modelcontextprotocol/clientInfo")
        info = info if isinstance(info, dict) else {}
        key = (principal, str(info.get("name")), str(info.get("version")), version)
        with self._lock:
            if key in self._seen:
                return
            self._seen[key] = None
            if len(self._seen) > self.SEEN:
                del self._seen[next(iter(self._seen))]
        self.note(f"host connected: client {_client(info)}, protocol {version} (no session), {_who(principal)}")


def _client(info: JSONObject) -> str:
    name = str(info.get("name", "?"))[:100].replace("\n", " ")
    return f"{name} {str(info.get('version', '?'))[:40]}".strip()


def _who(principal: str | None) -> str:
    return f"principal {principal}" if principal else "no principal"

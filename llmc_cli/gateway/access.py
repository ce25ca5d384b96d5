"""Who may ask the HTTP gateway, without a socket in sight: the listening address's rules
(loopback or not), Host and Origin checks against DNS rebinding, and the principals, found by
bearer token, OAuth access token or TLS client certificate. The HTTP adapter hands in the
request's headers (and the certificate's subject); what comes back is a principal, or the
refusal it writes (status, message, headers)."""

from __future__ import annotations

import functools
import ipaddress
import os
import shlex
import sys
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from llmc_cli.config.profiles import LoadedProfile, load_profile
from llmc_cli.errors import ConfigError, LlmcError, UsageError
from llmc_cli.gateway.admission import Refused
from llmc_cli.gateway.principals import Principal, authenticate, principals_of, subject_principal
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.model import clean_line

if TYPE_CHECKING:
    from llmc_cli.gateway.oauth_rs import ResourceServer

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def parse_address(text: str) -> tuple[str, int]:
    """'[HOST:]PORT' -> (host, port); the host defaults to 127.0.0.1, IPv6 in brackets."""
    host, port = "127.0.0.1", text
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise UsageError(f"--http {text}: expected [HOST:]PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


@functools.lru_cache(maxsize=1024)  # asked of Host headers and the listening address, request after request
def is_loopback_host(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_principal_hint(served: LoadedProfile) -> str:
    """The command that adds a principal to the served profile."""
    # A profile loaded by path is named by its path: `-p NAME` would not find it.
    named = served.path is None or served.path.parent.name == "profiles"
    return f"`llmc serve token create NAME -p {shlex.quote(served.name if named else str(served.path))}`"


def check_auth(served: LoadedProfile, host: str) -> None:
    """Refuse a gateway that would let everybody in off loopback (UsageError), or nobody at all
    (ConfigError), before anything starts; each message says what to do."""
    serve = served.profile.serve
    create = add_principal_hint(served)
    if not serve.auth_required() and not is_loopback_host(host):
        said = 'says [serve] auth = "none"' if serve.auth == "none" else "has no principals"
        raise UsageError(
            f"--http {host}: a non-loopback address needs inbound authentication, and the profile "
            f"{said}; add a principal with {create}"
        )
    if serve.auth_required() and not principals_of(served) and serve.oauth is None:
        raise ConfigError(
            f"profile {served.name}: no principal can reach this gateway: add one with {create}, "
            f'or set [serve] auth = "none" (loopback only)'
        )


def _stamp(profile: LoadedProfile) -> tuple[int, int, int] | None:
    """What changes when the profile file is rewritten (in place or by rename)."""
    if profile.path is None:
        return None
    try:
        st = os.stat(profile.path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class Door:
    """The gateway's door: Host and Origin rules, principals (re-read when the profile file
    changes) and how a request proves which one it is."""

    def __init__(self, served: LoadedProfile, host: str) -> None:
        self.served = served
        self.host = host
        self.principals = principals_of(served)
        self._stamp = _stamp(served)
        # When (time.monotonic()) the latest stat whose outcome the principals reflect began.
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self.oauth: ResourceServer | None = None
        if served.profile.serve.oauth is not None:
            from llmc_cli.gateway.oauth_rs import ResourceServer

            self.oauth = ResourceServer(served.profile.serve.oauth)
        check_auth(served, host)
        # Whether requests need a token: decided by the profile at start, and a profile re-read
        # later may make it so but never undo it (an edit or a revoke never opens the door).
        self.require_auth = served.profile.serve.auth_required()
        self._loopback = is_loopback_host(host)  # asked with every request: the address is fixed
        self.allowed_hosts = {h.lower() for h in served.profile.serve.allowed_hosts}
        self.allowed_origins = {o.rstrip("/").lower() for o in served.profile.serve.allowed_origins}
        self._hosts: dict[str, bool] = {}  # host_allowed's verdicts, by header value

    def current_principals(self, arrived: float | None = None) -> list[Principal]:
        """The principals as the profile file says now: a token revoked or rotated (`llmc serve
        token revoke/create`, or an edit) counts from the next request, without a restart. The
        file is re-read only when its stat says it changed. A request that `arrived` (its
        time.monotonic() on the event loop) before a stat that another request's thread began
        needs none of its own: whatever was written before it was sent, that stat saw. So under
        load one stat serves many requests (each a system call that lets go of the GIL), while
        a lone host's every request still stats. A profile broken mid-edit keeps the principals
        it had (said once on stderr) until it is valid again."""
        if arrived is not None and arrived < self._checked:
            return self.principals
        began = time.monotonic()
        stamp = _stamp(self.served)
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    self._reread()  # before _stamp: whoever finds the new stamp finds these principals
                    self._stamp = stamp
        if began > self._checked:  # after the principals this stat implies are in place
            self._checked = began
        return self.principals

    def _reread(self) -> None:
        try:
            profile = load_profile(str(self.served.path))
            self.principals = principals_of(profile)
            self.require_auth = self.require_auth or profile.profile.serve.auth_required()
            if self.require_auth and not self.principals and self.oauth is None:
                _note_stderr(
                    f"{self.served.name}: no principal can reach this gateway now: add one with {add_principal_hint(self.served)}"
                )
        except LlmcError as exc:
            _note_stderr(f"{self.served.name}: principals not re-read, the old ones stay: {exc.message}")

    def auth_required(self) -> bool:
        """Whether a request needs a token (a gateway whose principals were all revoked lets
        nobody in rather than everybody); off loopback always."""
        return self.require_auth or not self._loopback

    def auth_mode(self) -> str:
        """How requests authenticate: bearer, oauth, tls, combinations joined by +, or none."""
        if not self.auth_required():
            return "none"
        tokens = [p for p in self.principals if p.token_sha256]
        bearer = bool(tokens) or (self.oauth is None and not self.principals)  # none at all: bearer, none valid
        tls = any(p.tls_subject for p in self.principals)
        modes = (("bearer", bearer), ("oauth", self.oauth is not None), ("tls", tls))
        return "+".join(m for m, on in modes if on)

    def host_allowed(self, header: str | None) -> bool:
        """Whether a Host header names this gateway: judged once per header value (every request
        asks; the header is parsed as a URL's authority), since the rules are fixed for the door."""
        if not header:
            return False
        known = self._hosts.get(header)
        if known is None:
            name = urlsplit("//" + header).hostname or ""
            known = (
                name.lower() in LOOPBACK_NAMES
                or is_loopback_host(name)
                or header.lower() in self.allowed_hosts
                or name.lower() in self.allowed_hosts
            )
            if len(self._hosts) < 64:  # what a host sends: a few values, but any a client likes
                self._hosts[header] = known
        return known

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser: DNS rebinding needs one
        parts = urlsplit(origin)
        return is_loopback_host(parts.hostname or "") or origin.rstrip("/").lower() in self.allowed_origins

    def check_origin(self, host: str | None, origin: str | None) -> None:
        """Raise Refused (403) for a Host or Origin header a DNS-rebinding page would send."""
        if not self.host_allowed(host):
            raise Refused(403, "Forbidden: Host header not allowed (DNS rebinding protection)")
        if not self.origin_allowed(origin):
            raise Refused(403, "Forbidden: Origin not allowed (DNS rebinding protection)")

    def principal_of(
        self, authorization: str | None, tls_subject: dict[str, str] | None = None, arrived: float | None = None
    ) -> Principal | None:
        """Who a request is (that `arrived` then: current_principals): None when the gateway
        needs no principal; else the principal its bearer token, OAuth access token or TLS client
        certificate proves, or Refused (401/403) with the challenge to send."""
        principals = self.current_principals(arrived)
        if not self.auth_required():
            return None
        principal = authenticate(principals, authorization)
        if principal is None and tls_subject and not authorization:
            principal = subject_principal(principals, tls_subject)
        if principal is None and self.oauth is not None:
            verdict = self.oauth.authenticate(authorization)
            if not isinstance(verdict, Principal):  # a Refusal (gateway/oauth_rs.py)
                raise Refused(verdict.status, verdict.message, {"WWW-Authenticate": verdict.challenge})
            principal = verdict
        if principal is None:
            challenge = 'Bearer realm="llmc"'
            if authorization:
                challenge += ', error="invalid_token", error_description="unknown bearer token"'
            message = "Unauthorized: a valid bearer token is required"
            if not principals and self.oauth is None:
                message += "; no principal can reach this gateway now (its operator adds one with `llmc serve token create`)"
            raise Refused(401, message, {"WWW-Authenticate": challenge})
        return principal


# Where OAuth clients look for an authorization server and register themselves (RFC 8414, OpenID
# Connect Discovery, RFC 7591, and the default endpoints MCP's authorization spec falls back to).
OAUTH_PREFIXES = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/.well-known/oauth-protected-resource",
)
OAUTH_ENDPOINTS = {"/register", "/authorize", "/token", "/revoke", "/oauth/register", "/oauth/authorize", "/oauth/token"}


def oauth_probe(path: str, oauth: ResourceServer | None) -> JSONObject | None:
    """The OAuth error a client looking for OAuth at `path` gets with a 404 (never a JSON-RPC
    body: an OAuth client reads `error_description`); None: not such a path. A gateway in OAuth
    resource-server mode answers its own protected-resource metadata before this is asked."""
    if path not in OAUTH_ENDPOINTS and not path.startswith(OAUTH_PREFIXES):
        return None
    if oauth is None:
        description = (
            "this MCP gateway does not use OAuth: it takes a static bearer token (send the header "
            "Authorization: Bearer TOKEN; its operator makes one with `llmc serve token create NAME`)"
        )
    else:
        description = (
            "this MCP gateway is an OAuth resource server, not an authorization server: see "
            "/.well-known/oauth-protected-resource for where to get a token"
        )
    return {"error": "invalid_request", "error_description": description}


def _note_stderr(message: str) -> None:
    print(f"llmc serve: {clean_line(message)}", file=sys.stderr, flush=True)  # one line, whatever a client sent

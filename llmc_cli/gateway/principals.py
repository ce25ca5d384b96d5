"""Inbound bearer tokens of the HTTP gateway: one per principal, stored only as a SHA-256 hash in
the served profile (`[serve.principals.NAME] token_sha256`) or read from the environment
(`token_env`, hashed when the gateway starts). A principal maps to a profile, so one gateway
gives a CI agent, an analyst's desktop and a bot different tools. Each has its share of the gateway
(`max_sessions`, `max_requests`), so no principal can crowd the others out."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.tls_subject import parse_subject
from llmc_cli.errors import ConfigError

TOKEN_PREFIX = "llmc_"  # recognisable in a leaked-secret scan
# A principal's share unless its table says otherwise: a quarter of the gateway's sessions
# (hosts.MAX_SESSIONS), and requests in flight (a session's GET stream is one) enough for each.
MAX_SESSIONS = 64
MAX_REQUESTS = 128


@dataclass(frozen=True)
class Principal:
    name: str
    token_sha256: str
    profile: str | None  # None: the served profile
    max_sessions: int = MAX_SESSIONS
    max_requests: int = MAX_REQUESTS
    tls_subject: tuple[tuple[str, str], ...] = ()  # a client certificate's subject that proves it


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def principals_of(profile: LoadedProfile) -> list[Principal]:
    """The principals of the served profile; a token_env that is unset is a configuration error
    (a gateway that silently let nobody in, or everybody, would be worse)."""
    out = []
    for name, config in (profile.profile.serve.principals or {}).items():
        if config.token_env:
            token = os.environ.get(config.token_env)
            if not token or len(token) < 16:
                raise ConfigError(
                    f"principal {name}: environment variable {config.token_env} must hold a token of at least 16 characters"
                )
            digest = token_hash(token)
        else:
            digest = config.token_sha256 or ""  # none: only its certificate proves it
        subject = parse_subject(config.tls_subject) if config.tls_subject else ()
        out.append(
            Principal(
                name,
                digest,
                config.profile,
                config.max_sessions or MAX_SESSIONS,
                config.max_requests or MAX_REQUESTS,
                subject,
            )
        )
    return out


def authenticate(principals: list[Principal], authorization: str | None) -> Principal | None:
    """The principal whose token this `Authorization: Bearer ...` header carries, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    digest = token_hash(token.strip())
    found = None
    for principal in principals:  # compare with every one: the time taken says nothing
        if principal.token_sha256 and hmac.compare_digest(principal.token_sha256, digest):
            found = principal
    return found


def subject_principal(principals: list[Principal], subject: dict[str, str]) -> Principal | None:
    """The principal a verified TLS client certificate's subject names (every attribute of its
    `tls_subject` held by the subject); with more than one, none (an ambiguous name proves nobody)."""
    found = [p for p in principals if p.tls_subject and all(subject.get(key) == value for key, value in p.tls_subject)]
    return found[0] if len(found) == 1 else None

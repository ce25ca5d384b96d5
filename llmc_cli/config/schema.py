"""The profile schema: one dataclass per TOML table. Unknown keys are errors (typos in a
security policy must never be silently ignored).

    description = "..."            # what this profile is for
    lock = "llmc.lock"             # optional: refuse tools that drifted from this manifest lock
    audit_log = "/var/log/llmc/audit.jsonl"   # optional: default is the state directory
    audit_results = false          # store whole tool results in the audit log

    [servers.NAME]                 # one table per MCP server: command | url | builtin
    [policy]                       # least privilege: allow/deny, read-only, confirm, args, rates
    [llm]                          # which model `llmc ask` talks to
    [serve]                        # the gateway over HTTP: principals (inbound tokens), origins, hosts

Values may contain ${VAR} or ${VAR:-default}; they expand from the environment when a server is
used (config/profiles.py), never when a profile is saved.

Plain stdlib dataclasses, not pydantic models, so that this module imports without pydantic
(~200 ms of start-up): config/validation.py validates with pydantic.TypeAdapter(Profile) only when
a profile's text is new, and otherwise rebuilds it with from_json() from its profile cache.
pydantic reads each class's __pydantic_config__, and the Field arguments (gt=0) from
dataclasses.field metadata; checks across fields are in __post_init__. Building a class directly
checks only __post_init__ (like pydantic's model_construct, for trusted data).

This module's source is part of the profile cache key: any change here invalidates the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from llmc_cli.model import ProviderName

# What pydantic reads from a stdlib dataclass (a plain dict: ConfigDict is a TypedDict).
_STRICT = {"extra": "forbid"}
_POSITIVE = {"gt": 0}  # pydantic.Field(gt=0), without importing pydantic here


@dataclass
class OAuthConfig:
    """Pre-registered OAuth client for a remote server (secrets come from the environment)."""

    __pydantic_config__ = _STRICT

    client_id: str | None = None
    client_secret_env: str | None = None  # name of the env var holding the client secret
    client_metadata_url: str | None = None  # a client ID metadata document URL
    scopes: list[str] = field(default_factory=list)
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    token_auth_method: Literal["auto", "none", "client_secret_basic", "client_secret_post"] = "auto"


@dataclass
class ServerConfig:
    __pydantic_config__ = _STRICT

    # stdio
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    # remote
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    transport: Literal["auto", "http", "sse"] = "auto"
    oauth: OAuthConfig | None = None
    # built into llmc, run in-process
    builtin: Literal["workspace"] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # all kinds
    timeout: float = field(default=60.0, metadata=_POSITIVE)
    enabled: bool = True
    description: str | None = None

    def __post_init__(self) -> None:
        kinds = [k for k in ("command", "url", "builtin") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a server needs exactly one of 'command', 'url' or 'builtin'")
        if self.command and (self.headers or self.oauth):
            raise ValueError("'headers' and 'oauth' apply to remote servers ('url') only")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' apply to stdio servers ('command') only")


@dataclass
class ToolHints:
    """Per-tool override of the annotations a server declares (servers mislabel them)."""

    __pydantic_config__ = _STRICT

    readOnly: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    openWorld: bool | None = None


@dataclass
class PolicyConfig:
    __pydantic_config__ = _STRICT

    default: Literal["allow", "deny"] = "allow"
    allow: list[str] = field(default_factory=list)  # globs over server.tool
    deny: list[str] = field(default_factory=list)  # deny wins
    read_only: bool = False  # only tools whose (effective) readOnlyHint is true
    confirm: list[str] = field(default_factory=list)  # globs that need a human's yes
    confirm_destructive: bool = True  # every effectively destructive tool needs a yes
    approved: list[str] = field(default_factory=list)  # hashes of pre-approved exact calls
    hints: dict[str, ToolHints] = field(default_factory=dict)  # "server.tool" -> overrides
    args: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # tool glob -> arg -> globs
    calls_per_minute: int | None = field(default=None, metadata=_POSITIVE)
    tool_calls_per_minute: dict[str, int] = field(default_factory=dict)  # tool glob -> limit


@dataclass
class LlmConfig:
    __pydantic_config__ = _STRICT

    provider: ProviderName | None = None
    model: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = field(default=None, metadata=_POSITIVE)
    max_steps: int = field(default=10, metadata=_POSITIVE)
    timeout: float = field(default=300.0, metadata=_POSITIVE)  # whole run
    result_budget: int = field(default=20_000, metadata=_POSITIVE)  # characters of one tool result the model sees
    allow_sampling: bool = False
    system: str | None = None
    # The model first gets one search tool and the tools it finds (unset: so past 40 tools).
    tool_search: bool | None = None


@dataclass
class PrincipalConfig:
    """One caller of the HTTP gateway (`[serve.principals.NAME]`): its bearer token, kept only as
    a SHA-256 hash (`llmc serve token create`) or read from an environment variable, and the
    profile whose tools it gets (default: the profile being served)."""

    __pydantic_config__ = _STRICT

    token_sha256: str | None = None
    token_env: str | None = None
    profile: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        if bool(self.token_sha256) == bool(self.token_env):
            raise ValueError("a principal needs exactly one of 'token_sha256' or 'token_env'")
        if self.token_sha256 and not (len(self.token_sha256) == 64
                                      and all(c in "0123456789abcdef" for c in self.token_sha256)):
            raise ValueError("token_sha256 must be 64 lowercase hex digits")


@dataclass
class ServeOAuthConfig:
    """OAuth 2.1 resource-server mode of the HTTP gateway (`[serve.oauth]`): access tokens are JWTs
    from `issuer`, checked against its JWKS (`jwks_uri`, or found in the issuer's metadata), bound
    to `resource` (this gateway's canonical MCP URL, the `aud` they must carry). `claim` names the
    token claim (a string or a list, e.g. groups) whose value picks the profile in `profiles`
    ("*" matches any value; a token matching none is refused with 403)."""

    __pydantic_config__ = _STRICT

    issuer: str
    resource: str
    jwks_uri: str | None = None
    scopes: list[str] = field(default_factory=list)  # every one must be granted (403 insufficient_scope)
    claim: str = "sub"
    profiles: dict[str, str] = field(default_factory=dict)  # claim value -> profile name
    algorithms: list[str] = field(default_factory=lambda: ["RS256", "ES256"])
    leeway: int = field(default=30, metadata=_POSITIVE)  # seconds of clock skew allowed on exp/nbf

    def __post_init__(self) -> None:
        unsafe = [a for a in self.algorithms if a not in ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")]
        if unsafe or not self.algorithms:
            raise ValueError(f"algorithms must be asymmetric signature algorithms (RS256, ES256, ...), not {unsafe}")
        if not self.profiles:
            raise ValueError("'profiles' must map at least one claim value (or \"*\") to a profile")


@dataclass
class ServeConfig:
    __pydantic_config__ = _STRICT

    principals: dict[str, PrincipalConfig] = field(default_factory=dict)
    oauth: ServeOAuthConfig | None = None
    allowed_origins: list[str] = field(default_factory=list)  # browser origins besides loopback ones
    allowed_hosts: list[str] = field(default_factory=list)  # Host header values besides loopback ones
    # The gateway fronting exactly one server under that server's own names (no `server.` prefix):
    # a drop-in in front of a server whose hosts (or test suites) call it by fixed names.
    bare_names: bool = False
    # Hosts see llmc.search_tools and llmc.call_tool (plus the `pinned` tools, SERVER.TOOL globs)
    # instead of every tool: a big toolbox is searched, not sent whole to the model.
    tool_search: bool = False
    pinned: list[str] = field(default_factory=list)


@dataclass
class StateConfig:
    __pydantic_config__ = _STRICT

    # postgresql://user@host:port/db: the audit chain and rate windows shared by every llmc using
    # it (gateway replicas on many machines). No password here: libpq reads PGPASSWORD/.pgpass.
    url: str | None = None


@dataclass
class TelemetryConfig:
    __pydantic_config__ = _STRICT

    # OpenTelemetry (the `otel` extra). Where data goes and what the service is called come from
    # the standard OTEL_* environment variables, as for any instrumented program.
    enabled: bool = False
    audit_logs: bool = False  # audit records also leave as OTLP log records (the file stays the truth)
    capture_content: bool = False  # tool arguments/results on spans (masked like the audit log)
    flush_timeout: float = field(default=2.0, metadata=_POSITIVE)  # seconds a command waits for its export


@dataclass
class Profile:
    __pydantic_config__ = _STRICT

    description: str | None = None
    lock: str | None = None
    audit_log: str | None = None
    audit_results: bool = False
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    state: StateConfig = field(default_factory=StateConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)

    def __post_init__(self) -> None:
        for name in self.servers:
            if not name or "." in name or "/" in name or name.strip() != name:
                raise ValueError(f"server name {name!r} must be non-empty and contain no '.', '/' or spaces")
        if self.serve.bare_names and len(self.servers) != 1:
            raise ValueError("[serve] bare_names needs exactly one server: with more, names could clash")
        if self.serve.tool_search and "llmc" in self.servers:
            raise ValueError("[serve] tool_search: a server named 'llmc' would clash with llmc.search_tools and "
                             "llmc.call_tool; rename it")


def from_json(data: dict[str, Any]) -> Profile:
    """A Profile from what TypeAdapter(Profile).dump_python(mode="json") gave for a validated one
    (the profile cache; no pydantic). Every key is present there; a missing one raises KeyError.
    A new nested dataclass must be built here too (the cache refuses profiles that do not
    rebuild equal, so a miss here costs speed, never correctness)."""
    policy = data["policy"]
    return Profile(**{
        **data,
        "servers": {name: ServerConfig(**{**server, "oauth": server["oauth"] and OAuthConfig(**server["oauth"])})
                    for name, server in data["servers"].items()},
        "policy": PolicyConfig(**{**policy, "hints": {glob: ToolHints(**h) for glob, h in policy["hints"].items()}}),
        "llm": LlmConfig(**data["llm"]),
        "serve": ServeConfig(**{**data["serve"], "principals": {name: PrincipalConfig(**p) for name, p in
                                                                data["serve"]["principals"].items()},
                                 "oauth": data["serve"]["oauth"] and ServeOAuthConfig(**data["serve"]["oauth"])}),
        "state": StateConfig(**data["state"]),
        "telemetry": TelemetryConfig(**data["telemetry"]),
    })

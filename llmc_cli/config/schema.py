"""The profile schema: one dataclass per TOML table. Unknown keys are errors (typos in a
security policy must never be silently ignored).

    description = "..."            # what this profile is for
    lock = "llmc.lock"             # optional: refuse tools that drifted from this manifest lock
    audit_log = "/var/log/llmc/audit.jsonl"   # optional: default is the state directory
    audit_results = false          # store whole tool results in the audit log

    [servers.NAME]                 # one table per MCP server: command | url | builtin
    [policy]                       # least privilege: allow/deny, read-only, confirm, args, rates
    [policy.resources]             # ...and which resources and prompts may be read ([policy.prompts])
    [llm]                          # which model `llmc ask` talks to
    [serve]                        # the gateway over HTTP: principals (inbound tokens), origins, hosts
    [audit]                        # sync = "before_call" | "before_reply": when a decision is fsynced

Values may contain ${VAR} or ${VAR:-default}; they expand from the environment when a server is
used (config/profiles.py), never when a profile is saved.

Plain stdlib dataclasses, not pydantic models, so that this module imports without pydantic
(the largest import of a command's start-up): config/validation.py validates with pydantic.TypeAdapter(Profile) only when
a profile's text is new, and otherwise rebuilds it with from_json() from its profile cache.
pydantic reads each class's __pydantic_config__, and the Field arguments (gt=0) from
dataclasses.field metadata; checks across fields are in __post_init__. Building a class directly
checks only __post_init__ (like pydantic's model_construct, for trusted data).

This module's source is part of the profile cache key: any change here invalidates the cache.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from llmc_cli.errors import did_you_mean
from llmc_cli.model import ProviderName, dataclass

# The DLP detectors a profile may name in [dlp] redact/block (llmc_cli/guard/detectors.py).
DLP_DETECTORS = ("email", "phone", "credit_card", "iban", "secret", "private_key", "profile_secret")
# Data classification of a server, and the clearance of who may see it, lowest first.
Level = Literal["public", "internal", "confidential", "restricted"]
LEVELS: tuple[str, ...] = ("public", "internal", "confidential", "restricted")


def _check_detectors(names: list[str] | None, where: str) -> None:
    for name in names or []:
        if name not in DLP_DETECTORS:
            raise ValueError(
                f"{where}: unknown detector {name!r}{did_you_mean(name, DLP_DETECTORS)}; the detectors: {', '.join(DLP_DETECTORS)}"
            )


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
    # stdio: confinement (none when absent; see README "Sandboxing servers")
    sandbox: Literal["auto", "bwrap", "none"] | None = None
    network: bool | None = None  # inside a sandbox: absent means false
    read_paths: list[str] = field(default_factory=list)  # visible read-only (absolute paths)
    write_paths: list[str] = field(default_factory=list)  # visible read-write (absolute paths)
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
    connect_timeout: float | None = field(default=None, metadata=_POSITIVE)  # the handshake (None: 60 or timeout)
    enabled: bool = True
    description: str | None = None
    # The gateway: each host session gets its own connection (process, upstream session) to this
    # server, instead of sharing one among the sessions of a principal (a server whose state one
    # host session must never see another's, even the same principal's).
    per_session: bool = False
    # Guardrails (llmc_cli/guard/): how sensitive what this server holds is (who may see it:
    # [llm] clearance, [serve.principals.NAME] clearance, [policy] clearance), and DLP on its
    # results: dlp = false exempts it; redact/block replace the profile's [dlp] lists for it.
    classification: Level = "internal"
    dlp: bool = True
    redact: list[str] | None = None
    block: list[str] | None = None

    def __post_init__(self) -> None:
        _check_detectors(self.redact, "redact")
        _check_detectors(self.block, "block")
        kinds = [k for k in ("command", "url", "builtin") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a server needs exactly one of 'command', 'url' or 'builtin'")
        if self.command and (self.headers or self.oauth):
            raise ValueError("'headers' and 'oauth' apply to remote servers ('url') only")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' apply to stdio servers ('command') only")
        confinement = [k for k in ("network", "read_paths", "write_paths", "sandbox") if getattr(self, k) not in (None, [])]
        if not self.command and confinement:
            raise ValueError(f"'{confinement[0]}' applies to stdio servers ('command') only")
        if confinement and self.sandbox in (None, "none") and (self.read_paths or self.write_paths or self.network is not None):
            raise ValueError("'network', 'read_paths' and 'write_paths' need sandbox = \"auto\" or \"bwrap\"")
        for path in (*self.read_paths, *self.write_paths):
            if not path or "\0" in path or not (path.startswith(("/", "~", "${"))):
                raise ValueError(f"read_paths and write_paths must be absolute paths, got {path!r}")
            if path.rstrip("/") in ("", "~") or path.rstrip("/") == "/":
                raise ValueError(f"{path!r} would show the whole file system or home directory: name what the server needs")


@dataclass
class ToolHints:
    """Per-tool override of the annotations a server declares (servers mislabel them)."""

    __pydantic_config__ = _STRICT

    readOnly: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    openWorld: bool | None = None


@dataclass
class ReadRules:
    """`[policy.resources]` (globs over `server.URI`) or `[policy.prompts]` (over `server.NAME`):
    what a profile may read with resources/read (and see in resources/list and
    resources/templates/list) or get with prompts/get (and see in prompts/list). Deny wins;
    unset `default`: deny when `allow` lists anything, else what the tool rules say of the server
    (policy/rules.py decide_read)."""

    __pydantic_config__ = _STRICT

    default: Literal["allow", "deny"] | None = None
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


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
    # The highest classification of server anyone using this profile may see (unset: all; the
    # clearance of a command a person types). [llm] and a principal's clearance may only lower it.
    clearance: Level | None = None
    hints: dict[str, ToolHints] = field(default_factory=dict)  # "server.tool" -> overrides
    args: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # tool glob -> arg -> globs
    calls_per_minute: int | None = field(default=None, metadata=_POSITIVE)
    tool_calls_per_minute: dict[str, int] = field(default_factory=dict)  # tool glob -> limit
    resources: ReadRules = field(default_factory=ReadRules)  # resources/read, resource listings
    prompts: ReadRules = field(default_factory=ReadRules)  # prompts/get, prompts/list


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
    # The highest classification of server the model may see (unset: "internal": a provider's
    # model is not cleared for confidential data unless the profile says so); per provider name,
    # for `ask --provider` (overrides this one). [policy] clearance caps both.
    clearance: Level | None = None
    provider_clearance: dict[str, Level] = field(default_factory=dict)


@dataclass
class PrincipalConfig:
    """One caller of the HTTP gateway (`[serve.principals.NAME]`): its bearer token, kept only as
    a SHA-256 hash (`llmc serve token create`) or read from an environment variable, and the
    profile whose tools it gets (default: the profile being served)."""

    __pydantic_config__ = _STRICT

    token_sha256: str | None = None
    token_env: str | None = None
    # A TLS client certificate proves this principal (with `--tls-client-ca`): the subject's
    # attributes that must all match, e.g. "CN=ci-bot" or "CN=alice,O=Example".
    tls_subject: str | None = None
    profile: str | None = None
    description: str | None = None
    # Its share of the gateway (None: the defaults, gateway/hosts.py): sessions it may hold open
    # (past it, its own least recently used idle session ends) and requests it may have in flight.
    max_sessions: int | None = field(default=None, metadata=_POSITIVE)
    max_requests: int | None = field(default=None, metadata=_POSITIVE)
    # Its own calls per minute (tools/call, resources/read, prompts/get), counted beside the
    # profile's [policy] calls_per_minute, which every principal of the profile shares.
    calls_per_minute: int | None = field(default=None, metadata=_POSITIVE)
    # The highest classification of server this principal may see (unset: [serve] clearance).
    clearance: Level | None = None

    def __post_init__(self) -> None:
        if self.token_sha256 and self.token_env:
            raise ValueError("a principal needs at most one of 'token_sha256' or 'token_env'")
        if not (self.token_sha256 or self.token_env or self.tls_subject):
            raise ValueError("a principal needs one of 'token_sha256', 'token_env' or 'tls_subject'")
        if self.tls_subject is not None:
            from llmc_cli.config.tls_subject import parse_subject

            parse_subject(self.tls_subject)  # raises ValueError for a malformed one
        if self.token_sha256 and not (len(self.token_sha256) == 64 and all(c in "0123456789abcdef" for c in self.token_sha256)):
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
    # Each OAuth principal's share of the gateway, as [serve.principals.NAME] has (None: the defaults).
    max_sessions: int | None = field(default=None, metadata=_POSITIVE)
    max_requests: int | None = field(default=None, metadata=_POSITIVE)
    calls_per_minute: int | None = field(default=None, metadata=_POSITIVE)

    def __post_init__(self) -> None:
        unsafe = [a for a in self.algorithms if a not in ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")]
        if unsafe or not self.algorithms:
            raise ValueError(f"algorithms must be asymmetric signature algorithms (RS256, ES256, ...), not {unsafe}")
        if not self.profiles:
            raise ValueError("'profiles' must map at least one claim value (or \"*\") to a profile")


@dataclass
class ServeConfig:
    __pydantic_config__ = _STRICT

    # "required": every request needs a principal's token or an OAuth token (no principal: nobody
    # gets in); "none": nobody authenticates, loopback only. Unset: required once the profile has
    # [serve.principals] (even empty) or [serve.oauth], else none (a never-configured profile).
    auth: Literal["required", "none"] | None = None
    # None: the profile has no [serve.principals] table at all (not the same as an empty one).
    principals: dict[str, PrincipalConfig] | None = None
    oauth: ServeOAuthConfig | None = None
    allowed_origins: list[str] = field(default_factory=list)  # browser origins besides loopback ones
    allowed_hosts: list[str] = field(default_factory=list)  # Host header values besides loopback ones
    # The gateway fronting exactly one server under that server's own names (no `server.` prefix):
    # a drop-in in front of a server whose hosts (or test suites) call it by fixed names.
    bare_names: bool = False
    # How a host sees a server's tool and prompt names: "." (SERVER.TOOL, as MCP allows), or "__"
    # (SERVER__TOOL) or "_" (SERVER_TOOL), which also makes every name provider-safe
    # (^[a-zA-Z0-9_-]{1,64}$) for hosts that hand tool names straight to a model provider.
    name_separator: Literal[".", "__", "_"] = "."
    # Upstream connections of its own (processes, upstream sessions) one principal may hold at
    # once, and how long one no host session uses is kept (seconds).
    max_upstreams: int = field(default=16, metadata=_POSITIVE)
    upstream_idle_timeout: float = field(default=60.0, metadata=_POSITIVE)
    # TLS ends at a proxy in front of the gateway: no warning at start about plain HTTP off loopback.
    behind_proxy: bool = False
    # Processes serving `llmc serve --http` (1 to 64, or "auto": one per CPU); --workers wins.
    workers: int | Literal["auto"] = 1

    def __post_init__(self) -> None:
        if self.auth == "none" and (self.principals or self.oauth is not None):
            raise ValueError('auth = "none" lets everybody in: remove it, or remove [serve.principals] and [serve.oauth]')
        if self.workers != "auto" and not 1 <= self.workers <= 64:
            raise ValueError('workers must be a number from 1 to 64, or "auto"')

    def auth_required(self) -> bool:
        """Whether every request must carry a valid token (see `auth`)."""
        if self.auth is not None:
            return self.auth == "required"
        return self.principals is not None or self.oauth is not None

    # Hosts see llmc.search_tools and llmc.call_tool (plus the `pinned` tools, SERVER.TOOL globs)
    # instead of every tool: a big toolbox is searched, not sent whole to the model.
    tool_search: bool = False
    pinned: list[str] = field(default_factory=list)
    # The highest classification of server a host may see when its principal names none (and
    # every host of an unauthenticated gateway); unset: "internal". [policy] clearance caps it.
    clearance: Level | None = None


@dataclass
class StateConfig:
    __pydantic_config__ = _STRICT

    # postgresql://user@host:port/db: the audit chain and rate windows shared by every llmc using
    # it (gateway replicas on many machines). No password here: libpq reads PGPASSWORD/.pgpass.
    url: str | None = None


@dataclass
class CacheConfig:
    __pydantic_config__ = _STRICT

    # Results of these tools (SERVER.TOOL globs) are served from the cache for ttl_seconds, and
    # only when the tool is read-only by its annotations and [policy.hints]: never a destructive
    # or unannotated one, even if listed.
    ttl_seconds: float = field(default=300.0, metadata=_POSITIVE)
    tools: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for pattern in self.tools:
            if "." not in pattern:  # a bare tool name would never match `server.tool`
                raise ValueError(f'[cache] tools: {pattern!r} must be a SERVER.TOOL glob (e.g. "github.search_*")')


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
class OutputConfig:
    __pydantic_config__ = _STRICT

    # A listing's format when no --format or LLMC_FORMAT says: auto is a table on a terminal,
    # JSON when piped; json pins JSON on a terminal too.
    format: Literal["auto", "json", "jsonl", "table"] = "auto"


@dataclass
class DlpConfig:
    """`[dlp]`: detectors (DLP_DETECTORS) run on every text a result carries. `redact`: each
    finding replaced by [REDACTED:kind] before anything sees it; `block`: the call fails (exit 4)."""

    __pydantic_config__ = _STRICT

    redact: list[str] = field(default_factory=list)
    block: list[str] = field(default_factory=list)
    # Regions whose national phone formats are recognised (international "+" numbers always are).
    phone_regions: list[str] = field(default_factory=lambda: ["US"])

    def __post_init__(self) -> None:
        _check_detectors(self.redact, "[dlp] redact")
        _check_detectors(self.block, "[dlp] block")
        for region in self.phone_regions:
            if not (len(region) == 2 and region.isalpha() and region.isupper()):
                raise ValueError(f'[dlp] phone_regions: {region!r} is not a two-letter region code such as "US" or "GB"')


@dataclass
class GuardConfig:
    """`[guard]`: what becomes of a tool whose description the metadata scan (llmc tools scan)
    finds a high-severity attack in: "flag" (offered, the audit says so) or "hide" (never offered
    to a model or a gateway host, like a drifted tool)."""

    __pydantic_config__ = _STRICT

    descriptions: Literal["flag", "hide"] = "flag"


@dataclass
class SearchConfig:
    """`[search]`: how tool search ranks (`tools search`, `ask`'s search_tools, the gateway's
    llmc.search_tools). `semantic`: fuse a local embedding model's ranking with the lexical one
    (true needs the extra llmc-cli[semantic]; default off)."""

    __pydantic_config__ = _STRICT

    semantic: bool | None = None


@dataclass
class AuditConfig:
    """`[audit]`: when an allowed call's decision record is made durable. "before_call": written
    and fsynced before the call reaches its server. "before_reply": written (chained, in order)
    before the call is sent and fsynced while the server works, durable before any result, error
    or refusal reaches the caller (README, Audit: what a machine crash can then lose)."""

    __pydantic_config__ = _STRICT

    sync: Literal["before_call", "before_reply"] = "before_call"


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
    cache: CacheConfig = field(default_factory=CacheConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    dlp: DlpConfig = field(default_factory=DlpConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)

    def __post_init__(self) -> None:
        for name in self.servers:
            if not name or "." in name or "/" in name or name.strip() != name:
                raise ValueError(f"server name {name!r} must be non-empty and contain no '.', '/' or spaces")
        if self.serve.bare_names and len(self.servers) != 1:
            raise ValueError("[serve] bare_names needs exactly one server: with more, names could clash")
        if self.serve.tool_search and "llmc" in self.servers:
            raise ValueError(
                "[serve] tool_search: a server named 'llmc' would clash with llmc.search_tools and llmc.call_tool; rename it"
            )


def from_json(data: dict[str, Any]) -> Profile:
    """A Profile from what TypeAdapter(Profile).dump_python(mode="json") gave for a validated one
    (the profile cache; no pydantic). Every key is present there; a missing one raises KeyError.
    A new nested dataclass must be built here too (the cache refuses profiles that do not
    rebuild equal, so a miss here costs speed, never correctness)."""
    policy = data["policy"]
    return Profile(
        **{
            **data,
            "servers": {
                name: ServerConfig(**{**server, "oauth": server["oauth"] and OAuthConfig(**server["oauth"])})
                for name, server in data["servers"].items()
            },
            "policy": PolicyConfig(
                **{
                    **policy,
                    "hints": {glob: ToolHints(**h) for glob, h in policy["hints"].items()},
                    "resources": ReadRules(**policy["resources"]),
                    "prompts": ReadRules(**policy["prompts"]),
                }
            ),
            "llm": LlmConfig(**data["llm"]),
            "serve": ServeConfig(
                **{
                    **data["serve"],
                    "principals": None
                    if data["serve"]["principals"] is None
                    else {name: PrincipalConfig(**p) for name, p in data["serve"]["principals"].items()},
                    "oauth": data["serve"]["oauth"] and ServeOAuthConfig(**data["serve"]["oauth"]),
                }
            ),
            "state": StateConfig(**data["state"]),
            "cache": CacheConfig(**data["cache"]),
            "telemetry": TelemetryConfig(**data["telemetry"]),
            "output": OutputConfig(**data["output"]),
            "dlp": DlpConfig(**data["dlp"]),
            "guard": GuardConfig(**data["guard"]),
            "search": SearchConfig(**data["search"]),
            "audit": AuditConfig(**data["audit"]),
        }
    )

"""The profile schema: one pydantic model per TOML table. Unknown keys are errors (typos in a
security policy must never be silently ignored).

    description = "..."            # what this profile is for
    lock = "llmc.lock"             # optional: refuse tools that drifted from this manifest lock
    audit_log = "/var/log/llmc/audit.jsonl"   # optional: default is the state directory
    audit_results = false          # store whole tool results in the audit log

    [servers.NAME]                 # one table per MCP server: command | url | builtin
    [policy]                       # least privilege: allow/deny, read-only, confirm, args, rates
    [llm]                          # which model `llmc ask` talks to

Values may contain ${VAR} or ${VAR:-default}; they expand from the environment when a server is
used (config/profiles.py), never when a profile is saved.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    # defer_build: validators are built on first validation, not at import (start-up time).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class OAuthConfig(_Strict):
    """Pre-registered OAuth client for a remote server (secrets come from the environment)."""

    client_id: str | None = None
    client_secret_env: str | None = None  # name of the env var holding the client secret
    client_metadata_url: str | None = None  # a client ID metadata document URL
    scopes: list[str] = Field(default_factory=list)
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    token_auth_method: Literal["auto", "none", "client_secret_basic", "client_secret_post"] = "auto"


class ServerConfig(_Strict):
    # stdio
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # remote
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    transport: Literal["auto", "http", "sse"] = "auto"
    oauth: OAuthConfig | None = None
    # built into llmc, run in-process
    builtin: Literal["workspace"] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    # all kinds
    timeout: float = Field(default=60.0, gt=0)
    enabled: bool = True
    description: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "ServerConfig":
        kinds = [k for k in ("command", "url", "builtin") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a server needs exactly one of 'command', 'url' or 'builtin'")
        if self.command and (self.headers or self.oauth):
            raise ValueError("'headers' and 'oauth' apply to remote servers ('url') only")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' apply to stdio servers ('command') only")
        return self


class ToolHints(_Strict):
    """Per-tool override of the annotations a server declares (servers mislabel them)."""

    readOnly: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    openWorld: bool | None = None


class PolicyConfig(_Strict):
    default: Literal["allow", "deny"] = "allow"
    allow: list[str] = Field(default_factory=list)  # globs over server.tool
    deny: list[str] = Field(default_factory=list)  # deny wins
    read_only: bool = False  # only tools whose (effective) readOnlyHint is true
    confirm: list[str] = Field(default_factory=list)  # globs that need a human's yes
    confirm_destructive: bool = True  # every effectively destructive tool needs a yes
    approved: list[str] = Field(default_factory=list)  # hashes of pre-approved exact calls
    hints: dict[str, ToolHints] = Field(default_factory=dict)  # "server.tool" -> overrides
    args: dict[str, dict[str, list[str]]] = Field(default_factory=dict)  # tool glob -> arg -> globs
    calls_per_minute: int | None = Field(default=None, gt=0)
    tool_calls_per_minute: dict[str, int] = Field(default_factory=dict)  # tool glob -> limit


class LlmConfig(_Strict):
    provider: Literal["openai", "openai-responses", "anthropic", "gemini", "text"] | None = None
    model: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    max_steps: int = Field(default=10, gt=0)
    timeout: float = Field(default=300.0, gt=0)  # whole run
    result_budget: int = Field(default=20_000, gt=0)  # characters of one tool result the model sees
    summarize_with: str | None = None  # "provider:model"
    allow_sampling: bool = False
    system: str | None = None


class Profile(_Strict):
    description: str | None = None
    lock: str | None = None
    audit_log: str | None = None
    audit_results: bool = False
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    llm: LlmConfig = Field(default_factory=LlmConfig)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            if not name or "." in name or "/" in name or name.strip() != name:
                raise ValueError(f"server name {name!r} must be non-empty and contain no '.', '/' or spaces")
        return servers

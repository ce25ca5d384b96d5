"""Neutral data the whole program shares: what a server is, what a tool is, what a call returned.

Nothing here knows about a transport, a provider or the CLI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias, get_args
from urllib.parse import urlsplit, urlunsplit

from llmc_cli.lean import NamedTuple as NamedTuple
from llmc_cli.lean import clean as clean
from llmc_cli.lean import clean_line as clean_line
from llmc_cli.lean import collector_paused as collector_paused
from llmc_cli.lean import dataclass as dataclass
from llmc_cli.lean import expect_hashing as expect_hashing
from llmc_cli.lean import hmac_sha256 as hmac_sha256
from llmc_cli.lean import json_encoder as _encoder
from llmc_cli.lean import json_loads as json_loads
from llmc_cli.lean import nesting_depth as nesting_depth
from llmc_cli.lean import sha256 as sha256
from llmc_cli.lean import sha256_hex as sha256_hex
from llmc_cli.lean import sha256_of as sha256_of

# A JSON value as json.loads returns it (recursive; object keys are always str), for data llmc
# passes on without reading it all: tool arguments, structuredContent, `_meta`. mcp/messages.py
# types the MCP messages themselves.
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
JSONObject: TypeAlias = dict[str, JSON]

# The one registry of what llmc speaks to models. The LLM providers `ask` runs ([llm] provider,
# --provider); each sends its tools in the translate format of the same name.
ProviderName = Literal["openai", "openai-responses", "anthropic", "gemini", "text"]
PROVIDERS: tuple[str, ...] = get_args(ProviderName)
# The formats tool definitions translate to (`tools list/export --format`): MCP itself, every
# provider's, and gemini-legacy (the OpenAPI subset of older Gemini/Vertex SDKs, no provider runs it).
TOOL_FORMATS: tuple[str, ...] = ("mcp", "openai", "openai-responses", "anthropic", "gemini", "gemini-legacy", "text")
# The formats of APIs that reject or lose parts of a tool (what `tools lint` checks): all but
# MCP itself and the text listing, which take anything.
LINT_FORMATS: tuple[str, ...] = tuple(f for f in TOOL_FORMATS if f not in ("mcp", "text"))


# A process that encodes much (a batch: six encodings a call) switches to orjson when installed (the
# `fast` extra): 4-6x faster a record (bench/RESULTS.md, session 7), taken only where its text is
# json's byte for byte (hashes, HMACs and the audit chain are taken over it): orjson writes floats
# below 1e-4 another way (0.00001, 1e-7 where json writes 1e-05, 1e-07), NaN and Infinity as null,
# and refuses what json writes otherwise (integers beyond 64 bits, lone surrogates, keys that are
# not str, nesting past 254, subclasses of str, int, float, dict and list, which it is told to pass
# on): any of those, or a text that might hold one (the search below, false alarms included), is
# encoded by json instead. A short command never imports it (~1 ms).
_FAST_AFTER = 64  # encodings by json before orjson is imported
# 1e-7 (json writes 1e-07): compiled when orjson is taken up (0.36 M instructions at import)
_SMALL_EXPONENT = r"[0-9]e-[0-9](?![0-9])"


def _fast(plain: Callable[[object], str], sort_keys: bool) -> Callable[[object], str]:
    """orjson's encoding where it is json's (see above), else `plain`'s; `plain` without orjson."""
    found = _orjson(sort_keys)
    if found is None:
        return plain
    dumps, refused, option, _ = found
    small_exponent = re.compile(_SMALL_EXPONENT).search

    def encode(value: object) -> str:
        try:
            out = dumps(value, default=_refuse, option=option)
        except refused:  # (a TypeError) whatever orjson will not write, json writes or refuses
            return plain(value)
        # Three searches in C; a regular expression only after "e-" (one alternation cost more
        # than the encoding). On the str: CPython 3.11's `bytes in bytes` first tries its operand
        # as an integer and formats the TypeError it drops (~1,800 instructions a search). Also
        # in _fast_bytes: inline in both, as a function's call was ~350 instructions an encoding.
        text = out.decode("utf-8")
        if "null" in text or "0.0000" in text or ("e-" in text and small_exponent(text) is not None):
            return plain(value)
        return text

    return encode


def _fast_bytes(plain: Callable[[object], str]) -> Callable[[object, object], bytes]:
    """canonical_json_bytes on orjson (see above and there); without orjson, `plain`'s text."""
    found = _orjson(True)
    if found is None:
        return _canonical_bytes
    (dumps, refused, option, _), small_exponent, scalars = found, re.compile(_SMALL_EXPONENT).search, _SCALARS

    def encode(value: object, foreign: object = EVERYTHING) -> bytes:
        try:
            out = dumps(value, default=_refuse, option=option)
            if foreign is EVERYTHING:
                text = out.decode("utf-8")
            elif foreign is None or (type(foreign) is dict and scalars.issuperset(map(type, foreign.values()))):
                return out  # no float in it (a call's arguments, mostly), so none in `value`
            else:  # only the foreign part searched: the caller's own fields are most of the text
                text = dumps(foreign, default=_refuse, option=option).decode("utf-8")
        except refused:
            return plain(value).encode("utf-8")  # a lone surrogate: UnicodeEncodeError (json writes it)
        if "null" in text or "0.0000" in text or ("e-" in text and small_exponent(text) is not None):
            return plain(value).encode("utf-8")  # (_fast's test)
        return out

    return encode


def _fast_line(plain: Callable[[object], str]) -> Callable[[object, object], bytes]:
    """compact_json_line on orjson (see above): its bytes with the newline orjson appends, where
    _fast's test on their text passes (that text is not encoded again); `plain`'s otherwise.
    (On the text: bytes.find parses its arguments as a tuple, ~2,000 instructions a search.)"""
    found = _orjson(False)
    if found is None:
        return _compact_line
    dumps, refused, option, _ = found
    option |= 1024  # orjson.OPT_APPEND_NEWLINE
    small_exponent, scalars = re.compile(_SMALL_EXPONENT).search, _SCALARS

    def encode(value: object, foreign: object = EVERYTHING) -> bytes:
        try:
            out = dumps(value, default=_refuse, option=option)
            if foreign is None or (type(foreign) is dict and scalars.issuperset(map(type, foreign.values()))):
                return out  # no float in it, so none in `value` (canonical_json_bytes's `foreign`)
            text = out.decode("utf-8")
            if "null" not in text and "0.0000" not in text and ("e-" not in text or small_exponent(text) is None):
                return out
        except refused:
            pass
        return (plain(value) + "\n").encode("utf-8")

    return encode


EVERYTHING: Any = object()  # canonical_json_bytes's `foreign` by default: the whole value is checked
_SCALARS = frozenset({str, int, bool, type(None)})  # values that are never a float, nor hold one


def _orjson(sort_keys: bool) -> tuple[Callable[..., bytes], type[Exception], int, Callable[[bytes], Any]] | None:
    """orjson's dumps, its error, llmc's options and its loads; None without orjson."""
    try:
        import orjson
    except ImportError:
        return None
    option = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    return orjson.dumps, orjson.JSONEncodeError, option | (orjson.OPT_SORT_KEYS if sort_keys else 0), orjson.loads


def _refuse(value: object) -> object:
    raise TypeError  # a type orjson passes on: json decides


_STDLIB_COMPACT = _encoder()
_STDLIB_CANONICAL = _encoder(sort_keys=True)
_encoded = 0


# (orjson.loads, a table turning digits into 0) once the encoders moved to orjson: jsonrpc.decode
# reads a server's lines with it where its value is json's (it refuses NaN, lone surrogates, 1e400;
# it reads an integer past 64 bits as a float: a line with 19 digits in a row is json's).
FAST_LOADS: tuple[Callable[[bytes], Any], bytes] | None = None


def _counting(plain: Callable[[object], str]) -> Callable[[object], str]:
    def encode(value: object) -> str:
        global _encoded, _COMPACT, _CANONICAL, _CANONICAL_BYTES, _COMPACT_LINE, FAST_LOADS
        _encoded += 1
        if _encoded == _FAST_AFTER:
            _COMPACT, _CANONICAL = _fast(_STDLIB_COMPACT, False), _fast(_STDLIB_CANONICAL, True)
            _COMPACT_LINE = _fast_line(_STDLIB_COMPACT)
            _CANONICAL_BYTES = _fast_bytes(_STDLIB_CANONICAL)
            found = _orjson(False)
            FAST_LOADS = None if found is None else (found[3], bytes.maketrans(b"123456789", b"000000000"))
        return plain(value)

    return encode


def _canonical_bytes(value: object, foreign: object = EVERYTHING) -> bytes:
    return _CANONICAL(value).encode("utf-8")  # json's text: a process's first encodings (counted), or no orjson


def _compact_line(value: object, foreign: object = None) -> bytes:
    return (_COMPACT(value) + "\n").encode("utf-8")  # json's text: a process's first encodings (counted), or no orjson


_COMPACT = _counting(_STDLIB_COMPACT)
_COMPACT_LINE = _compact_line
_CANONICAL = _counting(_STDLIB_CANONICAL)
_CANONICAL_BYTES = _canonical_bytes


def compact_json(value: object) -> str:
    """One line of JSON, text as it is (not \\u-escaped): JSON-RPC on the wire, JSON Lines, the
    audit log, cache files."""
    return _COMPACT(value)


def compact_json_line(value: object, foreign: object = EVERYTHING) -> bytes:
    """compact_json(value) and a newline, as UTF-8: a JSON-RPC message on a stdio server's input.
    `foreign`: as canonical_json_bytes's, but a dict or None (a call's arguments: with only text,
    integers, booleans and nulls in it, the rest is the caller's own and orjson's bytes are json's)."""
    return _COMPACT_LINE(value, foreign)


def canonical_json(value: object) -> str:
    """The one serialisation that hashes, HMACs and fingerprints are taken over: sorted keys, no
    white space, text as it is (not \\u-escaped). Changing it changes every audit hash, call hash
    and lock-file hash already written."""
    return _CANONICAL(value)


def canonical_json_bytes(value: object, foreign: object = EVERYTHING) -> bytes:
    """canonical_json(value) as UTF-8, to hash and store as it is (the audit chain: orjson's bytes,
    not decoded and encoded again). `foreign`: the part of `value` that came from outside (None:
    none), the caller vouching for the rest (str, int, bool, None, and floats that are 0 or from
    1e-4 to 1e16, as durations rounded to 0.1 ms: orjson writes them as json does). Only that
    part is checked for what orjson writes otherwise (a float below 1e-4, NaN): an object of text
    and integers by type, else by its text. UnicodeEncodeError for a lone surrogate (in json's text)."""
    return _CANONICAL_BYTES(value, foreign)


def canonical_json_bytes_encoder() -> Callable[[object, object], bytes]:
    """canonical_json_bytes's encoder as it is now (orjson's once a process encodes much: the same
    bytes), for a caller that encodes many values in a row (the seal): a Python call fewer a value."""
    return _CANONICAL_BYTES


DEFAULT_CONNECT_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server. The core does not care where this description came from
    (an ad-hoc `--stdio`/`--url` flag, a profile, an imported desktop config)."""

    name: str
    command: tuple[str, ...] = ()  # stdio: argv of the server process
    env: Mapping[str, str] = field(default_factory=dict)  # added to the allow-listed environment
    cwd: str | None = None
    url: str | None = None  # remote: the MCP endpoint (or the legacy SSE endpoint)
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = "auto"  # remote only: auto | http | sse
    timeout: float = 60.0  # seconds per request
    connect_timeout: float | None = None  # seconds for the handshake (None: DEFAULT_CONNECT_TIMEOUT or `timeout`)
    builtin: str | None = None  # a server shipped with llmc, run in-process (e.g. "workspace")
    options: Mapping[str, Any] = field(default_factory=dict)  # options of a builtin server
    description: str | None = None
    oauth: OAuthSpec | None = None  # remote only: how to authorize when the server answers 401
    sandbox: SandboxSpec | None = None  # stdio only: how the profile confines it (None: it does not say)
    # stdio only: the argv that runs `command` contained (resource limits, bubblewrap), computed
    # above mcp/ from `sandbox`; empty: the command runs as it is.
    launch: tuple[str, ...] = ()
    adhoc: bool = False  # given on the command line (--stdio/--url), not a profile's: named by its URL in advice

    @property
    def handshake_timeout(self) -> float:
        """The bound of connecting (spawn, initialize or server/discover): its own setting, else
        DEFAULT_CONNECT_TIMEOUT or the request timeout, whichever is longer, so a short
        `--timeout` for calls does not cut off a server that is slow to start."""
        return self.connect_timeout or max(self.timeout, DEFAULT_CONNECT_TIMEOUT)

    @property
    def kind(self) -> str:
        if self.builtin:
            return "builtin"
        return "stdio" if self.command else "remote"

    def cache_key(self) -> str:
        """Identity of the server configuration, for caches (era detection, sessions): a digest,
        never the text itself, as a URL's query or userinfo or a command's arguments may carry
        an expanded ${SECRET}, and caches are files."""

        if self.builtin:
            return f"builtin:{self.builtin}"
        identity = "\x1f".join(self.command) + f"\x1f{self.cwd or ''}" if self.command else self.url or ""
        digest = sha256_hex(identity.encode("utf-8", "surrogatepass"))[:32]
        return f"{self.kind}:{digest}"

    def reach(self, secret: bytes) -> str:
        """How the server is reached, as it would run now (command, environment, directory, URL,
        headers, transport, builtin options, sandbox: ${VAR}s expanded), under an HMAC with
        `secret` (the approval key): the values may be secrets (a token in env or a header), and
        this identity goes where anyone may read it (a cache entry's file name, a keeper's
        socket). Two specs with the same reach are the same server for the same account; the
        timeouts, the description and how llmc contains it (`launch`) do not count."""
        how = {
            "command": self.command,
            "env": dict(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
            "transport": self.transport,
            "builtin": self.builtin,
            "options": dict(self.options),
            "sandbox": self.sandbox,
        }
        text = json.dumps(how, sort_keys=True, ensure_ascii=False, default=repr)
        return hmac_sha256(secret, text.encode("utf-8", "surrogatepass"))

    def shown_url(self) -> str | None:
        """The URL fit to print or store: without userinfo, query and fragment (where secrets go)."""
        return redact_url(self.url) if self.url else None


def redact_url(url: str) -> str:
    """scheme://host[:port]/path of a URL: no userinfo, query or fragment."""

    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"  # an IPv6 literal
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return "<unparsable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class SandboxSpec:
    """How a stdio server is confined (profile keys sandbox, network, read_paths, write_paths)."""

    mode: str = "none"  # auto (bwrap where it works) | bwrap | none
    network: bool = False
    read_paths: tuple[str, ...] = ()  # visible read-only
    write_paths: tuple[str, ...] = ()  # visible read-write

    def visible(self, path: str) -> bool:
        """Does the server see `path` (absolute, normalized) inside its sandbox?"""
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in (*self.read_paths, *self.write_paths))


@dataclass(frozen=True)
class OAuthSpec:
    """OAuth client settings of a remote server (profile `[servers.NAME.oauth]`). The secret stays
    in the environment: only the variable's name is kept here."""

    client_id: str | None = None
    client_secret_env: str | None = None
    client_metadata_url: str | None = None  # a client ID metadata document URL (https)
    scopes: tuple[str, ...] = ()
    grant: str = "authorization_code"  # or client_credentials (machine to machine)
    token_auth_method: str = "auto"  # auto | none | client_secret_basic | client_secret_post


@dataclass
class Tool:
    """One tool of one server, as the server described it (`raw` keeps it byte for byte)."""

    server: str
    name: str
    input_schema: JSONObject
    description: str = ""
    title: str | None = None
    output_schema: JSONObject | None = None
    annotations: JSONObject = field(default_factory=dict)
    raw: JSONObject = field(default_factory=dict)

    @property
    def qualified_name(self) -> str:
        return f"{self.server}.{self.name}"

    @property
    def properties(self) -> JSONObject:
        """The input schema's `properties` (argument name -> its schema); empty when it declares none."""
        properties = self.input_schema.get("properties")
        return properties if isinstance(properties, dict) else {}

    @classmethod
    def from_mcp(cls, server: str, raw: JSONObject) -> Tool:
        """From a tools/list entry (messages.ToolDefinition) as the server sent it: fields of the wrong type
        read as absent; `raw` keeps the entry as it came."""
        schema, output = raw.get("inputSchema"), raw.get("outputSchema")
        description, title = raw.get("description"), raw.get("title")
        annotations = raw.get("annotations")
        annotations = dict(annotations) if isinstance(annotations, dict) else {}
        if not (isinstance(title, str) and title):
            title = annotations.get("title")
        return cls(
            server=server,
            name=str(raw.get("name", "")),
            input_schema=schema if isinstance(schema, dict) else {"type": "object"},
            description=description if isinstance(description, str) else "",
            title=title if isinstance(title, str) and title else None,
            output_schema=output if isinstance(output, dict) else None,
            annotations=annotations,
            raw=raw,
        )


@dataclass
class ToolCall:
    server: str
    tool: str
    arguments: JSONObject = field(default_factory=dict)
    call_id: str | None = None  # the provider's id for this call, when an LLM made it

    @property
    def qualified_name(self) -> str:
        return f"{self.server}.{self.tool}"


@dataclass
class ToolResult:
    """A CallToolResult. `is_error` means the tool ran and failed: a result, not an exception."""

    content: list[JSONObject] = field(default_factory=list)  # content blocks (messages.ContentBlock)
    structured_content: JSON = None  # a JSON object when present (2025-06-18 on); passed on as it came
    is_error: bool = False
    meta: JSONObject | None = None
    duration_ms: float | None = None  # measured by llmc around the call
    cached: bool = False  # served from the result cache ([cache]), not asked of the server

    @classmethod
    def from_mcp(cls, raw: JSONObject) -> ToolResult:
        # The fields set as __init__ sets them, without its call (through type.__call__: ~3,000
        # instructions, one a batch's call); content's objects (most lists: all) kept, no comprehension's call
        result = object.__new__(cls)
        result.content = kept = content.copy() if isinstance(content := raw.get("content"), list) else []  # type: ignore[assignment]
        for c in kept:
            if type(c) is not dict:
                result.content = [c for c in kept if isinstance(c, dict)]
                break
        result.structured_content = raw.get("structuredContent")
        result.is_error = bool(raw.get("isError"))
        result.meta = meta if isinstance(meta := raw.get("_meta"), dict) else None
        result.duration_ms, result.cached = None, False
        return result

    @property
    def text(self) -> str:
        """The text parts joined; other parts named by a placeholder, so nothing vanishes silently."""
        parts = []
        for item in self.content:
            kind = item.get("type")
            if kind == "text":
                parts.append(str(item.get("text", "")))
            elif kind == "resource" and isinstance(resource := item.get("resource"), dict) and "text" in resource:
                parts.append(str(resource["text"]))
            elif kind == "resource_link":  # where it is and what it is called: what a reader needs of a link
                name = item.get("title") or item.get("name") or ""
                parts.append(f"[resource_link {name}: {item.get('uri', '')}]".replace(" :", ":"))
            else:
                label = item.get("mimeType") or item.get("uri") or ""
                parts.append(f"[{kind} {label}]".replace(" ]", "]"))
        return "\n".join(parts)

    def to_json(self) -> JSONObject:
        """As a CallToolResult (messages.CallToolResult)."""
        content: list[JSON] = list(self.content)
        out: JSONObject = {"content": content, "isError": self.is_error}
        if self.structured_content is not None:
            out["structuredContent"] = self.structured_content
        if self.meta:
            out["_meta"] = self.meta
        return out


# Tool arguments nested deeper than this are refused wherever they come from (a person's --json,
# a batch line, a model's tool call, an MCP host through the gateway), with this one message:
# far beyond any tool's schema, and far below Python's recursion limit.
MAX_ARGUMENT_DEPTH = 64
ARGUMENTS_TOO_DEEP = f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep"
# Any JSON-RPC message (a server's reply, a host's request) nested deeper than this is refused
# where it is decoded: whatever walks a message later (schemas, results, masking) stays far from
# Python's recursion limit. Arguments, nested at most MAX_ARGUMENT_DEPTH, sit a few levels down.
MAX_MESSAGE_DEPTH = 128
MESSAGE_TOO_DEEP = f"a JSON-RPC message nested more than {MAX_MESSAGE_DEPTH} levels deep"


def arguments_too_deep(arguments: object) -> bool:
    return nesting_depth(arguments, MAX_ARGUMENT_DEPTH + 1) > MAX_ARGUMENT_DEPTH


def parse_json(text: str, max_depth: int | None = MAX_ARGUMENT_DEPTH, too_deep: str = ARGUMENTS_TOO_DEEP) -> JSON:
    """JSON that a person or a file supplied, nested at most `max_depth` deep (None: as deep as
    the parser goes). ValueError saying why for anything else: invalid JSON, or JSON nested so deep
    (`too_deep`, by default the tool arguments' message) that it would end in a RecursionError here
    or in whatever walks the value later. Each caller wraps the reason in its own error (usage,
    config) with the name of where the text came from."""
    too_deep = too_deep if max_depth is not None else "JSON nested too deeply"
    try:
        value: JSON = json_loads(text)  # what json.loads returns is JSON by construction
    except RecursionError:
        raise ValueError(too_deep) from None
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    # nested deeper than max_depth only with more opening brackets than that (one count in C):
    # most texts are not walked at all
    if (
        max_depth is not None
        and len(text) > max_depth  # a shorter text cannot hold more brackets: no count
        and text.count("[") + text.count("{") > max_depth
        and nesting_depth(value, max_depth + 1) > max_depth
    ):
        raise ValueError(too_deep)
    return value

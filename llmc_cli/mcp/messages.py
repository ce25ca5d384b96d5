"""The shapes of the MCP messages llmc builds and reads, as TypedDicts, and the JSON values it passes on.

Field names are the wire names of the MCP schema (schema.json of each version in versions.py;
2024-11-05 .. 2026-07-28). Where versions differ the union of their fields is declared and the
fields a version lacks are NotRequired, so one TypedDict serves every era: e.g. `resultType`,
`cacheScope` and `ttlMs` exist only from 2026-07-28, `structuredContent` from 2025-06-18.

What a TypedDict promises: a message llmc BUILDS has these fields. A message llmc RECEIVES from a
peer is only this shape after the boundary that checked it (jsonrpc.decode checks the envelope;
mcp/validation.py checks results; model.Tool.from_mcp/ToolResult.from_mcp read defensively);
before that it is a `JSONObject`. Fields llmc only forwards (tool arguments, structuredContent,
`_meta`, capabilities objects it does not interpret) are `JSON`/`JSONObject`, not modelled further.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, NotRequired, TypeAlias, TypedDict

from llmc_cli.errors import ProtocolError

# JSON (any JSON value) and JSONObject (a JSON object) live in model.py, below mcp/, so the neutral
# data there can use them too; re-exported here with the message shapes.
from llmc_cli.model import JSON as JSON
from llmc_cli.model import JSONObject as JSONObject

RequestId: TypeAlias = int | str
ProgressToken: TypeAlias = int | str
Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
ResultType: TypeAlias = Literal["complete", "input_required"]  # 2026-07-28 Result.resultType
CacheScope: TypeAlias = Literal["public", "private"]  # 2026-07-28 CacheableResult.cacheScope


# The message shapes: TypedDicts for the type checker; at run time each is `dict` (what calling a
# TypedDict returns anyway). Creating the 42 classes compiled about 270 string annotations into
# ForwardRefs on every start-up (issue 34); nothing reads them at run time. SHAPES names them all (a
# test checks it against the classes below).
SHAPES: tuple[str, ...] = (
    "JSONRPCRequest",
    "JSONRPCNotification",
    "JSONRPCResultResponse",
    "ErrorObject",
    "JSONRPCErrorResponse",
    "Implementation",
    "Icon",
    "Annotations",
    "ResultMeta",
    "CacheableResult",
    "PaginatedResult",
    "ClientCapabilities",
    "ServerCapabilities",
    "InitializeRequestParams",
    "InitializeResult",
    "DiscoverResult",
    "ProgressNotificationParams",
    "CancelledNotificationParams",
    "LoggingMessageNotificationParams",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "TextResourceContents",
    "BlobResourceContents",
    "EmbeddedResource",
    "Resource",
    "ResourceLink",
    "ToolAnnotations",
    "ToolDefinition",
    "ListToolsResult",
    "CallToolRequestParams",
    "CallToolResult",
    "InputRequiredResult",
    "ResourceTemplate",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "ReadResourceResult",
    "PromptArgument",
    "Prompt",
    "ListPromptsResult",
    "PromptMessage",
    "GetPromptResult",
    "JSONRPCMessage",
    "ResourceContents",
    "ContentBlock",
)

if TYPE_CHECKING:
    # --- JSON-RPC 2.0 envelope -------------------------------------------------------------------

    class JSONRPCRequest(TypedDict):
        """A request: expects exactly one response with the same id."""

        jsonrpc: Literal["2.0"]
        id: RequestId
        method: str
        params: NotRequired[JSONObject]

    class JSONRPCNotification(TypedDict):
        """A notification: no id, never answered."""

        jsonrpc: Literal["2.0"]
        method: str
        params: NotRequired[JSONObject]

    class JSONRPCResultResponse(TypedDict):
        """A successful response (JSONRPCResponse before 2025-11-25)."""

        jsonrpc: Literal["2.0"]
        id: RequestId
        result: JSONObject

    class ErrorObject(TypedDict):
        """The `error` member of an error response (schema `Error`). Codes: jsonrpc.py's constants."""

        code: int
        message: str
        data: NotRequired[JSON]

    class JSONRPCErrorResponse(TypedDict):
        """An error response (JSONRPCError before 2025-11-25). id is null when the request's id was unreadable."""

        jsonrpc: Literal["2.0"]
        id: RequestId | None
        error: ErrorObject

    JSONRPCMessage: TypeAlias = JSONRPCRequest | JSONRPCNotification | JSONRPCResultResponse | JSONRPCErrorResponse

    # --- Shared structures -----------------------------------------------------------------------

    class Implementation(TypedDict):
        """clientInfo / serverInfo. title, description, icons, websiteUrl: 2025-06-18 on."""

        name: str
        version: str
        title: NotRequired[str]
        description: NotRequired[str]
        websiteUrl: NotRequired[str]
        icons: NotRequired[list[Icon]]

    class Icon(TypedDict):
        """An icon of a tool, resource, prompt or implementation (2025-11-25 on)."""

        src: str
        mimeType: NotRequired[str]
        sizes: NotRequired[list[str]]
        theme: NotRequired[Literal["light", "dark"]]

    class Annotations(TypedDict, total=False):
        """Hints on a content block or resource for its audience."""

        audience: list[Role]
        priority: float
        lastModified: str

    class ResultMeta(TypedDict, total=False):
        """Fields every Result may carry. resultType: 2026-07-28 ("complete" when absent)."""

        _meta: JSONObject
        resultType: ResultType

    class CacheableResult(ResultMeta, total=False):
        """A 2026-07-28 list/read result a client may cache for ttlMs (required there, absent before)."""

        cacheScope: CacheScope
        ttlMs: int

    class PaginatedResult(ResultMeta, total=False):
        nextCursor: str

    # --- Lifecycle -------------------------------------------------------------------------------

    class ClientCapabilities(TypedDict, total=False):
        """What a client offers: each present key is an object of that feature's options."""

        roots: JSONObject  # {"listChanged": bool}
        sampling: JSONObject
        elicitation: JSONObject  # 2025-06-18 on
        tasks: JSONObject  # 2025-11-25
        experimental: JSONObject
        extensions: JSONObject  # 2026-07-28

    class ServerCapabilities(TypedDict, total=False):
        """What a server offers: a key's presence is the offer; its object holds that feature's options."""

        tools: JSONObject  # {"listChanged": bool}
        resources: JSONObject  # {"subscribe": bool, "listChanged": bool}
        prompts: JSONObject  # {"listChanged": bool}
        logging: JSONObject
        completions: JSONObject  # 2025-03-26 on
        tasks: JSONObject  # 2025-11-25
        experimental: JSONObject
        extensions: JSONObject  # 2026-07-28

    class InitializeRequestParams(TypedDict):
        """`initialize` params (2024-11-05 .. 2025-11-25; 2026-07-28 has no handshake)."""

        protocolVersion: str
        capabilities: ClientCapabilities
        clientInfo: Implementation
        _meta: NotRequired[JSONObject]

    class InitializeResult(TypedDict):
        """`initialize` result: the version the server chose, what it offers, who it is."""

        protocolVersion: str
        capabilities: ServerCapabilities
        serverInfo: Implementation
        instructions: NotRequired[str]
        _meta: NotRequired[JSONObject]

    class DiscoverResult(CacheableResult):
        """2026-07-28 `server/discover` result: what initialize's result said, without a session."""

        supportedVersions: list[str]
        capabilities: ServerCapabilities
        instructions: NotRequired[str]

    # --- Notifications llmc reads ----------------------------------------------------------------

    class ProgressNotificationParams(TypedDict):
        """notifications/progress. message: 2025-03-26 on."""

        progressToken: ProgressToken
        progress: float
        total: NotRequired[float]
        message: NotRequired[str]
        _meta: NotRequired[JSONObject]

    class CancelledNotificationParams(TypedDict):
        """notifications/cancelled: the sender no longer wants the answer to requestId."""

        requestId: RequestId
        reason: NotRequired[str]
        _meta: NotRequired[JSONObject]

    class LoggingMessageNotificationParams(TypedDict):
        """notifications/message: a server's log line; data is any JSON."""

        level: LoggingLevel
        data: JSON
        logger: NotRequired[str]
        _meta: NotRequired[JSONObject]

    # --- Content ---------------------------------------------------------------------------------

    class TextContent(TypedDict):
        type: Literal["text"]
        text: str
        annotations: NotRequired[Annotations]
        _meta: NotRequired[JSONObject]

    class ImageContent(TypedDict):
        """data: base64."""

        type: Literal["image"]
        data: str
        mimeType: str
        annotations: NotRequired[Annotations]
        _meta: NotRequired[JSONObject]

    class AudioContent(TypedDict):
        """data: base64 (2025-03-26 on)."""

        type: Literal["audio"]
        data: str
        mimeType: str
        annotations: NotRequired[Annotations]
        _meta: NotRequired[JSONObject]

    class TextResourceContents(TypedDict):
        uri: str
        text: str
        mimeType: NotRequired[str]
        _meta: NotRequired[JSONObject]

    class BlobResourceContents(TypedDict):
        """blob: base64."""

        uri: str
        blob: str
        mimeType: NotRequired[str]
        _meta: NotRequired[JSONObject]

    ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents

    class EmbeddedResource(TypedDict):
        type: Literal["resource"]
        resource: ResourceContents
        annotations: NotRequired[Annotations]
        _meta: NotRequired[JSONObject]

    class Resource(TypedDict):
        """An entry of resources/list (and, with type "resource_link", a content block: ResourceLink)."""

        uri: str
        name: str
        title: NotRequired[str]
        description: NotRequired[str]
        mimeType: NotRequired[str]
        size: NotRequired[int]
        annotations: NotRequired[Annotations]
        icons: NotRequired[list[Icon]]
        _meta: NotRequired[JSONObject]

    class ResourceLink(Resource):
        """A content block pointing at a resource instead of embedding it (2025-06-18 on)."""

        type: Literal["resource_link"]

    ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource

    # --- Tools -----------------------------------------------------------------------------------

    class ToolAnnotations(TypedDict, total=False):
        """Untrusted hints about a tool's behaviour (2025-03-26 on); llmc's policy never relies on them."""

        title: str
        readOnlyHint: bool
        destructiveHint: bool
        idempotentHint: bool
        openWorldHint: bool

    class ToolDefinition(TypedDict):
        """An entry of tools/list. inputSchema/outputSchema are JSON Schema objects (translate/schema.py)."""

        name: str
        inputSchema: JSONObject
        title: NotRequired[str]
        description: NotRequired[str]
        outputSchema: NotRequired[JSONObject]  # 2025-06-18 on
        annotations: NotRequired[ToolAnnotations]
        icons: NotRequired[list[Icon]]
        _meta: NotRequired[JSONObject]

    class ListToolsResult(PaginatedResult, CacheableResult):
        tools: list[ToolDefinition]

    class CallToolRequestParams(TypedDict):
        """tools/call params. arguments are the caller's, passed through. inputResponses and
        requestState: 2026-07-28, the second round of a call whose first result was input_required."""

        name: str
        arguments: NotRequired[JSONObject]
        inputResponses: NotRequired[JSONObject]
        requestState: NotRequired[str]
        _meta: NotRequired[JSONObject]

    class CallToolResult(ResultMeta):
        """tools/call result. isError: the tool failed (its content says why), not the protocol."""

        content: list[ContentBlock]
        structuredContent: NotRequired[JSONObject]  # 2025-06-18 on; matches the tool's outputSchema
        isError: NotRequired[bool]

    class InputRequiredResult(ResultMeta):
        """2026-07-28: a result asking the client for input (elicitation, sampling, roots) before the
        request can complete; the client repeats the request with inputResponses and requestState."""

        inputRequests: NotRequired[JSONObject]
        requestState: NotRequired[str]

    # --- Resources -------------------------------------------------------------------------------

    class ResourceTemplate(TypedDict):
        uriTemplate: str  # RFC 6570
        name: str
        title: NotRequired[str]
        description: NotRequired[str]
        mimeType: NotRequired[str]
        annotations: NotRequired[Annotations]
        icons: NotRequired[list[Icon]]
        _meta: NotRequired[JSONObject]

    class ListResourcesResult(PaginatedResult, CacheableResult):
        resources: list[Resource]

    class ListResourceTemplatesResult(PaginatedResult, CacheableResult):
        resourceTemplates: list[ResourceTemplate]

    class ReadResourceResult(CacheableResult):
        contents: list[ResourceContents]

    # --- Prompts ---------------------------------------------------------------------------------

    class PromptArgument(TypedDict):
        name: str
        title: NotRequired[str]
        description: NotRequired[str]
        required: NotRequired[bool]

    class Prompt(TypedDict):
        """An entry of prompts/list."""

        name: str
        title: NotRequired[str]
        description: NotRequired[str]
        arguments: NotRequired[list[PromptArgument]]
        icons: NotRequired[list[Icon]]
        _meta: NotRequired[JSONObject]

    class ListPromptsResult(PaginatedResult, CacheableResult):
        prompts: list[Prompt]

    class PromptMessage(TypedDict):
        role: Role
        content: ContentBlock

    class GetPromptResult(ResultMeta):
        messages: list[PromptMessage]
        description: NotRequired[str]
else:
    globals().update(dict.fromkeys(SHAPES, dict))


def object_at(message: JSONObject, key: str) -> JSONObject:
    """`message[key]` when it is a JSON object, else an empty one (absent, null or of another type):
    how llmc reads an optional object (`params`, `result`, `_meta`, `capabilities`) of a message."""
    value = message.get(key)
    return value if isinstance(value, dict) else {}


def request_id(message: JSONObject) -> RequestId | None:
    """A message's `id` when it is one JSON-RPC allows a request to have (a string or a number)."""
    value = message.get("id")
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


# -- a list method read to its end (server/utilities/pagination; 2026-07-28 utilities/caching) --

MAX_PAGES = 1000  # a server that paginates forever is lying


def all_pages(
    request: Callable[[str, JSONObject], JSONObject], name: str, method: str, key: str, params: JSONObject | None, modern: bool
) -> tuple[list[JSONObject], float | None]:
    """Every page of `method` (`request(method, params)` asks the server `name` for one), and
    how many seconds the list stays fresh: the shortest `ttlMs` of its pages (absent or negative
    is 0, stale at once), or None in the initialize era (`modern` False: fresh until the server
    announces a change). A repeated cursor is a lying server."""
    items: list[JSONObject] = []
    ttls: list[float] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = request(method, {**(params or {}), **({"cursor": cursor} if cursor else {})})
        batch = page.get(key)
        if not isinstance(batch, list):
            raise ProtocolError(f"{name}: {method} result has no '{key}' list")
        items.extend(x for x in batch if isinstance(x, dict))
        if modern:
            ttl = page.get("ttlMs")
            ttls.append(max(ttl, 0) / 1000 if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else 0.0)
        next_cursor = page.get("nextCursor")
        if not next_cursor:
            return items, min(ttls) if ttls else None
        if not isinstance(next_cursor, str):
            raise ProtocolError(f"{name}: {method} returned a nextCursor that is not a string")
        cursor = next_cursor
        if cursor in seen:
            raise ProtocolError(f"{name}: {method} returned the same cursor twice")
        seen.add(cursor)
    raise ProtocolError(f"{name}: {method} returned more than {MAX_PAGES} pages")

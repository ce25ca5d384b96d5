"""The server the official conformance suite's server scenarios expect, built with the `mcp` SDK:
the tools, resources, prompts and completions those scenarios call by name, each answering what
the scenario checks. Run directly and behind `llmc serve` (tests/conformance/test_server_conformance.py).

Usage: python conformance_target.py [stdio|streamable-http] [--port N] [--legacy]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Annotated, Any

from mcp import types
from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, ListRoots, MCPServer, Resolve, Sample
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage
from pydantic import BaseModel, Field

# A 1x1 PNG and a tiny WAV: the scenarios check type, mimeType and that data is base64
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Answer(BaseModel):
    response: str = Field(description="What the user answers")


class Defaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active", description="User status", json_schema_extra={"enum": ["active", "inactive", "pending"]}
    )
    verified: bool = Field(default=True, description="Verification status")


class Enums(BaseModel):
    """SEP-1330: the enum shapes an elicitation schema may use."""

    untitledSingle: str = Field(description="Plain enum", json_schema_extra={"enum": ["active", "inactive", "pending"]})
    titledSingle: str = Field(
        description="Titled single choice",
        json_schema_extra={
            "oneOf": [
                {"const": "low", "title": "Low Priority"},
                {"const": "medium", "title": "Medium Priority"},
                {"const": "high", "title": "High Priority"},
            ]
        },
    )
    untitledMulti: list[str] = Field(
        description="Plain multi choice", json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}}
    )
    titledMulti: list[str] = Field(
        description="Titled multi choice",
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "feature", "title": "New Feature"},
                    {"const": "bug", "title": "Bug Fix"},
                    {"const": "docs", "title": "Documentation"},
                ]
            }
        },
    )
    legacyEnum: str = Field(
        description="Enum with enumNames",
        json_schema_extra={"enum": ["small", "medium", "large"], "enumNames": ["Small Size", "Medium Size", "Large Size"]},
    )


# SEP-1613: the 2020-12 keywords a listing must keep as they are
SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


class Events(EventStore):
    """Every SSE event a stream sent, so a client that lost the stream resumes it (Last-Event-ID)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, JSONRPCMessage | None]] = []  # (stream, message); the id is index + 1

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        self.events.append((stream_id, message))
        return str(len(self.events))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream = self.events[int(last_event_id) - 1][0]
        for index in range(int(last_event_id), len(self.events)):
            sid, message = self.events[index]
            if sid == stream and message is not None:  # None: a priming event, nothing to replay
                await send_callback(EventMessage(message, str(index + 1)))
        return stream


def text_resource(uri: str, text: str, mime: str = "text/plain") -> types.EmbeddedResource:
    return types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime, text=text))


def sample(prompt: str) -> Sample:
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))], max_tokens=100)


def ask(message: str) -> Elicit[Answer]:
    return Elicit(message, Answer)


def ask_defaults() -> Elicit[Defaults]:
    return Elicit("Please provide user information", Defaults)


def ask_enums() -> Elicit[Enums]:
    return Elicit("Please select values using different enum schema types", Enums)


def client_roots() -> ListRoots:
    return ListRoots()


def outcome(label: str, answer: ElicitationResult[Any]) -> str:
    content = answer.data.model_dump_json() if isinstance(answer, AcceptedElicitation) else "{}"
    return f"{label}: action={answer.action}, content={content}"


def build() -> MCPServer:
    server = MCPServer(name="llmc-conformance-target", version="1.0.0")

    @server.tool(description="Answers with one text block")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Answers with an image")
    def test_image_content() -> list[types.ImageContent]:
        return [types.ImageContent(type="image", data=PNG, mime_type="image/png")]

    @server.tool(description="Answers with audio")
    def test_audio_content() -> list[types.AudioContent]:
        return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]

    @server.tool(description="Answers with an embedded resource")
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        return [text_resource("test://embedded-resource", "This is an embedded resource content.")]

    @server.tool(description="Answers with text, an image and a resource")
    def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
        return [
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            text_resource("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}), "application/json"),
        ]

    @server.tool(description="Logs three messages while it runs")
    async def test_tool_with_logging(ctx: Context) -> str:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step)
            await asyncio.sleep(0.05)
        return "Tool with logging executed successfully"

    @server.tool(description="Reports progress 0, 50, 100")
    async def test_tool_with_progress(ctx: Context) -> str:
        for done in (0, 50, 100):
            await ctx.report_progress(progress=done, total=100, message=f"Completed step {done} of 100")
            await asyncio.sleep(0.05)
        meta = ctx.request_context.meta
        return str(meta.progress_token if meta else 0)

    @server.tool(description="Fails with a tool error")
    def test_error_handling() -> str:
        raise RuntimeError("This tool intentionally returns an error for testing")

    # Elicitation and sampling through resolvers: the SDK asks mid-call in the initialize era and
    # with an input_required result in 2026-07-28, so one tool serves both eras.
    @server.tool(description="Asks the client's model (sampling)")
    async def test_sampling(prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(sample)]) -> str:
        content = sampled.content
        return f"LLM response: {content.text if isinstance(content, types.TextContent) else 'No response'}"

    @server.tool(description="Asks the client's user (elicitation)")
    async def test_elicitation(message: str, answer: Annotated[ElicitationResult[Answer], Resolve(ask)]) -> str:
        return outcome("User response", answer)

    @server.tool(description="Elicits with defaults for every primitive type (SEP-1034)")
    async def test_elicitation_sep1034_defaults(answer: Annotated[ElicitationResult[Defaults], Resolve(ask_defaults)]) -> str:
        return outcome("Elicitation result", answer)

    @server.tool(description="Elicits with every enum shape (SEP-1330)")
    async def test_elicitation_sep1330_enums(answer: Annotated[ElicitationResult[Enums], Resolve(ask_enums)]) -> str:
        return outcome("Elicitation completed", answer)

    @server.tool(description="The client's roots (roots/list), as JSON")
    async def test_list_roots(roots: Annotated[types.ListRootsResult, Resolve(client_roots)]) -> str:
        return json.dumps([str(root.uri) for root in roots.roots])

    @server.tool(description="Tells subscribers that test://watched-resource changed (initialize era)")
    async def test_touch_watched(ctx: Context) -> str:
        await ctx.session.send_resource_updated("test://watched-resource")
        return "touched"

    @server.tool(description="Closes its SSE stream mid-call: the client resumes it (SEP-1699)")
    async def test_reconnection(ctx: Context) -> str:
        await ctx.info("Before disconnect")
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)  # the client reconnects after the retry interval
        await ctx.info("After reconnect")
        return "Reconnection test completed"

    @server.tool(description="Tool with JSON Schema 2020-12 features")
    def json_schema_2020_12_tool(name: str = "", address: dict[str, str] | None = None) -> str:
        return f"name={name} address={address}"

    listed = server._tool_manager.get_tool("json_schema_2020_12_tool")
    assert listed is not None
    listed.parameters = SCHEMA_2020_12  # as written, not as pydantic would derive it

    @server.resource("test://static-text", description="A static text resource", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", description="A static binary resource", mime_type="image/png")
    def static_binary() -> bytes:
        return base64.b64decode(PNG)

    @server.resource("test://template/{id}/data", description="A resource template", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", description="A resource to subscribe to", mime_type="text/plain")
    def watched() -> str:
        return "Watched resource content"

    @server.prompt(description="A prompt without arguments")
    def test_simple_prompt() -> list[dict[str, Any]]:
        return [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]

    @server.prompt(description="A prompt with two required arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": {"type": "text", "text": f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"}}]

    @server.prompt(description="A prompt with an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
        return [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."},
                },
            },
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
        ]

    @server.prompt(description="A prompt with an image")
    def test_prompt_with_image() -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
        ]

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        return types.Completion(values=[], total=0, has_more=False)

    # logging/setLevel and resources/(un)subscribe: MCPServer has no decorator for them
    async def accept(ctx: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()

    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, accept)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, accept)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, accept)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "streamable-http"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--legacy", action="store_true", help="no server/discover: initialize-era clients only")
    args = parser.parse_args()
    server = build()
    if args.legacy:
        server._lowlevel_server._request_handlers.pop("server/discover")  # the SDK exposes no switch for it
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(event_store=Events(), retry_interval=100)
    # h11, the SDK's own HTTP stack: uvicorn picks httptools when it is installed (llmc depends on
    # it), and on httptools the SDK refuses an Mcp-Name value with surrounding whitespace (SEP-2243)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", http="h11")


if __name__ == "__main__":
    sys.exit(main())

"""What one host reads through its connection: the lists of tools, resources, resource templates
and prompts (its clearance applied, a page at a time), resources/read, prompts/get and
completion/complete; and the names it gives resources and prompts, routed back to (server, name).

Reads and completions go through the services pipeline (policy, audit with the host's identity, rate limits).
What the policy hides is answered as what does not exist, in listings, reads, completions and
subscriptions (listening.py routes through here) alike, so a host cannot tell the two apart.

connection.py holds a HostReads per connection and hands it these methods; this module sees the
connection only as a ReadingHost, so the import goes one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from llmc_cli.errors import LlmcError, PolicyDenied, RpcError
from llmc_cli.gateway.relay import own_result
from llmc_cli.gateway.served import ServedHost, pipeline
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject
from llmc_cli.mcp.server import RequestError
from llmc_cli.services.reads import Read

if TYPE_CHECKING:
    from llmc_cli.policy import ReadKind

# A list method -> the key of its items, the field each is named by, the capability that offers it.
LISTS = {
    "resources/list": ("resources", "uri", "resources"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", "resources"),
    "prompts/list": ("prompts", "name", "prompts"),
}


class ReadingHost(ServedHost, Protocol):
    """What a host's reads use of its connection: what every part answering a host does, and
    its paging of lists (McpServer.page: the same page size and cursors as every list)."""

    def page(self, key: str, items: Sequence[JSON], params: JSONObject) -> JSONObject: ...


class HostReads:
    # What answer() answers (tools/list comes through McpServer's own _list_tools hook: tools()).
    METHODS = frozenset({*LISTS, "resources/read", "prompts/get", "completion/complete"})

    def __init__(self, connection: ReadingHost) -> None:
        self.connection = connection

    def answer(self, method: str, params: JSONObject, modern: str | None) -> JSONObject:
        """One of METHODS, for the host."""
        connection = self.connection
        toolbox = connection.toolbox
        if method in LISTS:
            key, field, capability = LISTS[method]
            items = toolbox.listing.gather(method, key, field, capability, connection.upstreams, connection.clearance)
            return _not_cacheable(connection.page(key, items, params), modern)
        if method == "resources/read":
            server, uri = self.route(params.get("uri"), "resource", modern)
            result = self._read(Read(server, "resource", uri), params, modern)
            contents = result.get("contents")
            if isinstance(contents, list):
                result["contents"] = [
                    {**c, "uri": toolbox.routes.expose(server, str(c.get("uri", "")))} if isinstance(c, dict) else c
                    for c in contents
                ]
            return _not_cacheable(result, modern)  # cacheable in 2026-07-28, like the lists
        if method == "prompts/get":
            server, name = self.route(params.get("name"), "prompt", modern)
            arguments = params.get("arguments") or {}
            if not (isinstance(arguments, dict) and all(isinstance(v, str) for v in arguments.values())):
                raise RequestError(jsonrpc.INVALID_PARAMS, "prompts/get arguments must be an object of strings")
            strings = {key: value for key, value in arguments.items() if isinstance(value, str)}  # all are
            return self._read(Read(server, "prompt", name, strings), params, modern)
        return self._complete(params, modern)  # completion/complete: the last of METHODS

    def tools(self, params: JSONObject, modern: str | None) -> JSONObject:
        """tools/list: the tools the host's clearance and the policy let it see, described."""
        toolbox = self.connection.toolbox
        if toolbox.serve.tool_search:
            from llmc_cli.gateway import search  # tool search: loaded when the profile asks for it

            tools = search.listing(toolbox, self.connection.clearance)
        else:
            tools = [toolbox.listing.describe(t) for t in toolbox.listing.tools(self.connection.clearance)]
        return _not_cacheable(self.connection.page("tools", tools, params), modern)

    def route(self, name: JSON, what: str, modern: str | None = None) -> tuple[str, str]:
        """A namespaced name -> (server, its name there); RequestError for an unknown one."""
        connection = self.connection
        routes = connection.toolbox.routes
        route = (
            routes.route_prompt(name, connection.upstreams, connection.clearance) if what == "prompt" else routes.route_uri(name)
        )
        if route is None:
            raise _unknown(what, name, modern)
        return route

    def readable_route(self, name: JSON, kind: ReadKind, modern: str | None = None) -> tuple[str, str]:
        """route(), and the same error for what the policy hides (what a read of it would be refused)."""
        what = "prompt" if kind == "prompt" else "resource"
        server, rest = self.route(name, what, modern)
        connection = self.connection
        if not connection.toolbox.listing.readable(kind, server, rest, connection.upstreams, connection.clearance):
            raise _unknown(what, name, modern)
        return server, rest

    def _read(self, request: Read, params: JSONObject, modern: str | None) -> JSONObject:
        """A host's resources/read or prompts/get, through services.read (policy, audit with the
        host's identity, rate limits). What the policy denies is answered as what does not exist:
        the spec's error for an unknown resource or prompt, as for a name no server has."""
        connection = self.connection
        toolbox = connection.toolbox
        calls = pipeline(connection, params, modern)
        toolbox.outages.revive(request.server, connection.upstreams)
        try:
            return own_result(calls.run(request).raw)
        except PolicyDenied as exc:
            retry = exc.details.get("retryAfter")
            if retry is not None:  # a rate limit: the host may try again later
                raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message, {"retryAfter": retry}) from None
            if exc.details.get("rule") == "invalid_text":
                raise RequestError(jsonrpc.INVALID_PARAMS, exc.message) from None
            raise _unknown(request.kind, toolbox.routes.shown(request.kind, request.server, request.name), modern) from None
        except RpcError as exc:  # the upstream refused the request itself: the host hears the same
            raise RequestError(exc.code or jsonrpc.INTERNAL_ERROR, exc.message, exc.data) from None
        except LlmcError as exc:
            raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message) from None

    def _complete(self, params: JSONObject, modern: str | None) -> JSONObject:
        """completion/complete: a read of the prompt or resource template it completes (policy,
        audit, rate limits); what the policy hides is answered as what does not exist."""
        ref, argument, context = params.get("ref"), params.get("argument"), params.get("context") or {}
        if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise RequestError(jsonrpc.INVALID_PARAMS, "completion/complete needs a ref of type ref/prompt or ref/resource")
        if not (isinstance(argument, dict) and isinstance(argument.get("name"), str) and isinstance(argument.get("value"), str)):
            raise RequestError(jsonrpc.INVALID_PARAMS, "completion/complete needs an argument with a name and a value")
        resolved = (context.get("arguments") or {}) if isinstance(context, dict) else None
        if not (isinstance(resolved, dict) and all(isinstance(v, str) for v in resolved.values())):
            raise RequestError(jsonrpc.INVALID_PARAMS, "completion/complete context arguments must be an object of strings")
        strings = {key: value for key, value in resolved.items() if isinstance(value, str)}  # all are
        completing = (str(argument["name"]), str(argument["value"]))
        if ref["type"] == "ref/prompt":
            server, name = self.route(ref.get("name"), "prompt", modern)
            return self._read(Read(server, "prompt", name, strings, completing), params, modern)
        server, uri = self.route(ref.get("uri"), "resource", modern)
        return self._read(Read(server, "resource", uri, strings, completing), params, modern)


def _not_cacheable(out: JSONObject, modern: str | None) -> JSONObject:
    if modern:  # depends on the profile and the upstreams' state: not cacheable, not shared
        out.update(ttlMs=0, cacheScope="private")
    return out


def _unknown(what: str, name: JSON, modern: str | None) -> RequestError:
    """The spec's error for a resource or prompt that does not exist (or that the policy hides):
    a resource's is -32002 before 2026-07-28 and -32602 since, with the URI as data."""
    if what == "resource":
        return RequestError(
            jsonrpc.INVALID_PARAMS if modern else jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {name}", {"uri": name}
        )
    return RequestError(jsonrpc.INVALID_PARAMS, f"Unknown {what}: {name}")

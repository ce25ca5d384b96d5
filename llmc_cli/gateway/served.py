"""A host's connection as the parts that answer its requests see it (host_reads.py, tool_calls.py),
and the services pipeline each of its requests goes through. They import this, never
connection.py, so the dependency goes one way."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from llmc_cli import services
from llmc_cli.mcp.messages import JSONObject

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.gateway.toolbox import Toolbox
    from llmc_cli.model import Tool, ToolCall
    from llmc_cli.services import Pipeline
    from llmc_cli.services.calls import Conclusions


class ServedHost(Protocol):
    """The toolbox a host is served from, its upstream connections, its principal and the
    clearance it has, whose cached results are its own, and what the audit trail records of it."""

    @property
    def toolbox(self) -> Toolbox: ...

    @property
    def upstreams(self) -> Catalog: ...

    @property
    def clearance(self) -> str | None: ...

    @property
    def principal(self) -> str | None: ...  # whose own rate limit its calls count against

    @property
    def cache_scope(self) -> str: ...

    @property
    def conclusions(self) -> Conclusions: ...  # what its calls conclude alike (Toolbox.conclusions of its clearance)

    @property
    def rate_share(self) -> tuple[str, int] | None: ...  # its principal's own calls per minute (Toolbox.rate_share)

    def host_identity(self, params: JSONObject, modern: str | None) -> JSONObject: ...


def pipeline(
    host: ServedHost,
    params: JSONObject,
    modern: str | None,
    *,
    interactive: bool = False,
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None,
) -> Pipeline:
    """The pipeline of one of the host's requests (services.host_calls): the profile's policy,
    state and audit trail, the host's identity, upstreams and clearance, and what its
    connection worked out once (its conclusions, its rate share); `confirm` asks the host's
    user where `interactive` says it can be asked."""
    toolbox = host.toolbox
    return services.host_calls(
        host.upstreams,
        toolbox.profile,
        toolbox.state,
        audit=toolbox.audit,
        masker=toolbox.masker,
        client=host.host_identity(params, modern),
        host_session=host.cache_scope,
        interactive=interactive,
        confirm=confirm,
        clearance=host.clearance,
        conclusions=host.conclusions,
        rate_share=host.rate_share,
    )

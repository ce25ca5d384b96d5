"""A host's connection as the modules beneath connection.py see it (toolbox.py, relay.py; and
listening.py's ListeningHost and tool_calls.py's CallingHost, which add to it): what they ask
of it, not the class.
connection.py imports them; they import only this, so the dependency goes one way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.server import Send

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog


class Changes(Protocol):
    def changed(self, method: str) -> None: ...

    def updated(self, server: str, params: JSONObject) -> None: ...


class Host(Protocol):
    """What the toolbox and the relay use: the host's upstream connections, where list and
    resource changes go, and how to ask the host something (elicitation, sampling)."""

    @property
    def upstreams(self) -> Catalog: ...

    @property
    def subscriptions(self) -> Changes: ...

    @property
    def clearance(self) -> str | None: ...  # servers above it are neither shown nor signalled

    def ask_client(self, method: str, params: JSONObject, send: Send, timeout: float = 600.0) -> JSONObject: ...

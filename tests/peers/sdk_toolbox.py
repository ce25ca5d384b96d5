"""An `mcp` SDK server whose tools exercise tool search (tests/search/test_ranking.py): every
description starts with the same sentence about the server (boilerplate), arguments carry
allowed values (enums) and nested documented objects, and one tool is described in German,
Chinese and Korean.

Usage: python sdk_toolbox.py   (stdio)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Literal, NoReturn

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

BOILERPLATE = (
    "This tool belongs to the vehicle control system, which lets users control the engine, doors, "
    "climate and lights of the car. Tool description: "
)


class Climate(BaseModel):
    temperature: float = Field(description="Target cabin temperature in degrees.")
    mode: Literal["heat", "cool", "defrost"] = Field(description="What the air does.")


class Stop(BaseModel):
    address: str = Field(description="Street address of a waypoint.")
    postal_code: str = Field(description="Postal code of the waypoint.")


def build() -> MCPServer:
    server = MCPServer(name="llmc-test-toolbox", version="1.0.0")

    @server.tool(description=BOILERPLATE + "Start or stop the engine.")
    def startEngine(ignitionMode: Literal["START", "STOP"]) -> str:
        return f"engine {ignitionMode}"

    @server.tool(description=BOILERPLATE + "Lock or unlock doors.")
    def lockDoors(unlock: bool, doors: list[Literal["driver", "passenger", "rear_left", "rear_right"]]) -> str:
        return f"doors {doors} unlocked={unlock}"

    @server.tool(description=BOILERPLATE + "Adjust the climate control.")
    def setClimate(settings: Climate) -> str:
        return f"climate {settings.mode}"

    @server.tool(description=BOILERPLATE + "Set the navigation route through some stops.")
    def setNavigation(stops: list[Stop]) -> str:
        return f"{len(stops)} stops"

    @server.tool(description="Wetter für eine Stadt, z. B. Zürich oder Genève. 城市天气预报. 도시 날씨 검색.")
    def wetter(stadt: str) -> str:
        return f"Wetter in {stadt}"

    return server


def configure(argv: list[str], exit: Callable[[int], NoReturn] = os._exit, environ: Mapping[str, str] = os.environ) -> MCPServer:
    """The server (no options), for tests/peer_threads.py."""
    return build()


if __name__ == "__main__":
    build().run("stdio")
    sys.exit(0)

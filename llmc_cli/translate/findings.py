"""The one record of what a translation had to change or drop."""

from __future__ import annotations

import json
from dataclasses import field
from functools import lru_cache
from typing import Any

from llmc_cli.model import dataclass

# Where a finding points, built lazily: the root's text (e.g. "$.parameters"), or (parent, key)
# with an int key for a list index. A walk makes one for every node it visits but a finding for
# few of them, so the text is only written when a finding needs it (`render`).
Path = str | tuple[Any, Any]


def render(path: Path) -> str:
    """`$.a.b[0]["odd key"]`: a key that would make the path ambiguous is quoted."""
    keys = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    return path + "".join(map(_segment, reversed(keys)))


@lru_cache(maxsize=1024)  # the same few keys ("properties", "items", a tool's property names) recur
def _segment(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    return f".{key}" if key.replace("_", "a").replace("$", "a").isalnum() else f"[{json.dumps(key)}]"


@dataclass(frozen=True)
class Finding:
    """One loss or rewrite: which tool, where in the generated definition (a JSON path such as
    `$.parameters.properties.mode`), what happened and why. `target` is the format it concerns."""

    tool: str  # server.tool, or "*" for the whole request (e.g. too many tools)
    path: str
    what: str
    why: str
    target: str = ""

    def to_json(self) -> dict[str, str]:
        """server and tool apart, as `tools diff` and every other output names a tool (a server
        name never contains a dot); "*" (the whole request) has no server."""
        server, dot, tool = self.tool.partition(".")
        where = {"server": server, "tool": tool} if dot else {"tool": self.tool}
        return {**where, "target": self.target, "path": self.path, "what": self.what, "why": self.why}

    def __str__(self) -> str:
        return f"{self.target}: {self.tool} {self.path}: {self.what} ({self.why})"


@dataclass
class Report:
    """Collects the findings of one tool translated for one target."""

    tool: str
    target: str
    findings: list[Finding] = field(default_factory=list)
    strict: bool = False  # the definition went out in OpenAI strict mode

    def note(self, path: Path, what: str, why: str) -> None:
        self.findings.append(Finding(self.tool, render(path), what, why, self.target))

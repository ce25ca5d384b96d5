"""The one record of what a translation had to change or drop."""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def note(self, path: str, what: str, why: str) -> None:
        self.findings.append(Finding(self.tool, path, what, why, self.target))

"""llmc: let any LLM use the tools of any MCP server, under a policy, with an audit trail."""

import re
from collections.abc import Callable
from importlib import import_module
from typing import Any, cast

__version__ = "0.1.0"


def lazy_names(package: str, namespace: dict[str, Any], where: dict[str, str]) -> Callable[[str], Any]:
    """A package's module-level __getattr__ (PEP 562): each name of its interface is imported
    with the module `where` says holds it, when first asked for, then kept in the package's
    namespace. So a single call loads no batch runner, lint or
    PostgreSQL store just because their package was imported."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")

        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


class _LazyPattern:
    """A regular expression compiled on its first use (re.compile's result does the work)."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self._source, self._flags)
        return getattr(compiled, name)


def lazy_pattern(source: str, flags: int = 0) -> re.Pattern[str]:
    """re.compile(source, flags), compiled when first used: for the patterns of rare paths (a
    crashed server's stderr, a reply nested too deep, text that is not ASCII, a sandboxed
    server). Compiling is pure Python and costs every process that imports the module: 0.1-0.9
    ms each, ~2.9 ms of a `call --batch` start-up for the six such patterns it loaded (issue 34)."""
    return cast("re.Pattern[str]", _LazyPattern(source, flags))

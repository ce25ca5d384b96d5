"""llmc: let any LLM use the tools of any MCP server, under a policy, with an audit trail."""

from collections.abc import Callable
from importlib import import_module
from typing import Any

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

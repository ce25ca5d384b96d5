"""llmc: let any LLM use the tools of any MCP server, under a policy, with an audit trail."""

import re
import typing
from collections.abc import Callable
from importlib import import_module
from types import TracebackType
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


# typing.ForwardRef's slots on the Pythons whose ForwardRef.__init__ the class below follows.
_FORWARD_REF_SLOTS = (
    "__forward_arg__",
    "__forward_code__",
    "__forward_evaluated__",
    "__forward_value__",
    "__forward_is_argument__",
    "__forward_is_class__",
    "__forward_module__",
)


class _ForwardRef(typing.ForwardRef, _root=True):  # type: ignore[call-arg,misc]  # typing's own guard
    """typing.ForwardRef whose text is compiled when the reference is first evaluated, not when
    it is made. The first compile() of a process costs ~9 M instructions on its own (CPython then
    sets up its AST types), and nothing in a command's run ever evaluates the references that
    importing click makes. Equality, hashing, repr and evaluation are typing's own."""

    __slots__ = ()

    def __init__(self, arg: str, is_argument: bool = True, module: Any = None, *, is_class: bool = False) -> None:
        if not isinstance(arg, str):
            raise TypeError(f"Forward reference must be a string -- got {arg!r}")
        self.__forward_arg__ = arg
        self.__forward_evaluated__ = False
        self.__forward_value__ = None
        self.__forward_is_argument__ = is_argument
        self.__forward_is_class__ = is_class
        self.__forward_module__ = module

    @property  # a property over typing's slot, which keeps the code once compiled
    def __forward_code__(self) -> Any:  # type: ignore[override]
        slot = typing.ForwardRef.__dict__["__forward_code__"]
        try:
            return slot.__get__(self)
        except AttributeError:
            pass
        arg = self.__forward_arg__
        try:  # as typing.ForwardRef.__init__ compiles it (`*Ts` unpacked by hand)
            code = compile(f"({arg},)[0]" if arg[0] == "*" else arg, "<string>", "eval")
        except SyntaxError:
            raise SyntaxError(f"Forward reference must be an expression -- got {arg!r}") from None
        slot.__set__(self, code)
        return code


class forward_refs_compiled_when_used:
    """Within the block (an import at start-up), the typing forward references that are made
    (a TypedDict's string annotations, a TypeVar's bound given as text) compile their text when
    first evaluated (typing.get_type_hints), not as they are made: importing click makes 26 and
    a command evaluates none, while the first compile() of a process costs ~9 M instructions (a
    twentieth of a 1-call batch, issue 34). Outside the block typing is as it was; on a Python
    whose ForwardRef differs from the one _ForwardRef follows, nothing changes at all."""

    def __enter__(self) -> None:
        self._saved = typing.ForwardRef
        if self._saved.__dict__.get("__slots__") == _FORWARD_REF_SLOTS and _ForwardRef.__bases__ == (self._saved,):
            typing.ForwardRef = _ForwardRef  # type: ignore[misc]  # typing's _type_convert makes them

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        typing.ForwardRef = self._saved  # type: ignore[misc]

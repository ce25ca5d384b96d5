"""Standard modules that a command's start-up imports and seldom uses, loaded when first used.

click imports `inspect` (with ast, dis, tokenize and linecache) for cleandoc and isfunction,
`datetime` for its DateTime type, `gettext` for its messages, and `uuid` for its UUID type (and
uuid `platform`, for platform.system()); subprocess imports `locale` (text mode) and `signal`
(Popen.terminate), the built-in servers' framework `traceback` (with linecache and tokenize, for
a tool's crash). A `call --batch` or a `tools list` uses none of them: 43 M instructions of a
1-call batch's 288 M (issue 34). install() puts a stand-in for each into sys.modules before click is
imported. `import inspect` binds the stand-in (the import statement reads only its __spec__); the
first name the stand-in does not hold imports the real module, under a lock per module (two
threads touching it first at once load it once), copies the real module's names into the stand-in
and returns the asked one; `from inspect import x` does that at once. sys.modules holds the real
module from then on; the stand-in (what click, dataclasses and subprocess bound) holds the same
objects.

A stand-in holds, before the load, only what gives the real module's answer without it:
- inspect.cleandoc of a one-line text with no tab and no leading blank (every option's help,
  which click cleans as it builds the option) is that text; any other text loads inspect;
- datetime's classes are _datetime's (the C module), which datetime itself re-exports;
- gettext.gettext and ngettext (which click binds by `from gettext import ...` as it imports)
  load gettext when first called, and call its own;
- platform.system() (which uuid calls as it imports) on Linux is os.uname()'s "Linux".
importlib.util.LazyLoader cannot do this on Python 3.11: its module loads on any attribute,
__spec__ too, which the import statement reads.

Not deferred: uuid (click's UUID type subclasses ParamType[uuid.UUID] as it imports).
"""

from __future__ import annotations

import os
import sys
import threading
import types
from importlib import import_module
from importlib.machinery import PathFinder
from typing import Any

try:
    import _datetime
except ImportError:  # a Python without the C module: datetime gets no stand-in
    _datetime = None

# datetime's __all__: the C module's classes and constants, which datetime.py binds by
# `from _datetime import *`.
DATETIME_NAMES = ("date", "datetime", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR", "UTC")


class StandIn(types.ModuleType):
    """A module that imports itself on the first name it does not hold (see the docstring)."""

    def __getattr__(self, name: str) -> Any:
        if name == "__path__":  # what `from X import y` asks first: a package's, never these modules'
            raise AttributeError(f"module {self.__name__!r} has no attribute '__path__'")
        return getattr(load(self.__name__), name)

    def __dir__(self) -> list[str]:
        return dir(load(self.__name__))


_stand_ins: dict[str, StandIn] = {}
_locks: dict[str, threading.RLock] = {}
_loaded: dict[str, types.ModuleType] = {}


def load(name: str) -> types.ModuleType:
    """The real module of the stand-in `name`, imported once (the first thread imports it, the
    others wait for it); the stand-in then holds the real module's names. In the importing
    thread itself (a module that imports this one back as it loads) the module is, as in any
    import cycle, the partly initialised one."""
    real = _loaded.get(name)
    if real is not None:
        return real
    stand_in = _stand_ins.get(name)
    if stand_in is None:  # none was installed: the module was imported before install()
        return import_module(name)
    with _locks[name]:
        if sys.modules.get(name) is not stand_in:
            return _loaded.get(name) or import_module(name)  # loaded, or loading in this thread
        del sys.modules[name]
        try:
            real = import_module(name)
        except BaseException:
            sys.modules[name] = stand_in
            raise
        stand_in.__dict__.update(real.__dict__)
        _loaded[name] = real
        return real


def _cleandoc(doc: Any) -> Any:
    """inspect.cleandoc, which gives a one-line text with no tab and no leading blank as it is."""
    if type(doc) is str and "\n" not in doc and "\t" not in doc and not doc[:1].isspace():
        return doc
    return load("inspect").cleandoc(doc)


def _system() -> str:
    """platform.system(): on Linux (sys.platform, and the kernel's name) "Linux"."""
    if sys.platform == "linux" and os.uname().sysname == "Linux":
        return "Linux"
    return str(load("platform").system())


def _gettext(message: str) -> str:
    """gettext.gettext: the real one, loaded when first called."""
    return str(load("gettext").gettext(message))


def _ngettext(msgid1: str, msgid2: str, n: int) -> str:
    """gettext.ngettext: the real one, loaded when first called."""
    return str(load("gettext").ngettext(msgid1, msgid2, n))


def _served() -> dict[str, dict[str, Any]]:
    served: dict[str, dict[str, Any]] = {
        "inspect": {"cleandoc": _cleandoc},
        "gettext": {"gettext": _gettext, "ngettext": _ngettext},
        "platform": {"system": _system},
        "locale": {},
        "signal": {},
        "traceback": {},
    }
    if _datetime is not None:
        served["datetime"] = {name: getattr(_datetime, name) for name in DATETIME_NAMES}
    return served


def install() -> None:
    """Stand-ins for the modules above that are not imported yet (once per process; a process
    that has imported one, a test run, keeps it as it is)."""
    for name, names in _served().items():
        if name in sys.modules or name in _stand_ins:
            continue
        spec = PathFinder.find_spec(name)
        if spec is None:
            continue
        stand_in = StandIn(name)
        # what ModuleType sets and the real module sets otherwise: asked for, it loads the module
        for unset in ("__doc__", "__package__", "__loader__"):
            delattr(stand_in, unset)
        stand_in.__spec__ = spec
        stand_in.__dict__.update(names)
        _locks[name] = threading.RLock()
        _stand_ins[name] = stand_in
        sys.modules[name] = stand_in

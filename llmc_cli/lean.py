"""What start-up costs less with: the stdlib's dataclass decorator without compiling source text
at import, typing.NamedTuple without evaluating its annotations, and SHA-256 (and HMAC-SHA256)
without initialising OpenSSL on a short command; json.dumps without building an encoder per call
and json.loads without its Python around the scanner; the cyclic collector kept off bounded work
whose objects live on (collector_paused). Each behaves as the stdlib's
(tests/test_model_dataclass.py, tests/test_model_namedtuple.py, tests/test_model_hashing.py);
model.py re-exports them for the whole program (issue 34: a call through a keeper was 2.4x the
instructions of `import click` and one round trip, most of it start-up).
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import gc
import json
import re  # (model.py's import: no start-up cost of its own)
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import _FIELD_CLASSVAR as _CLASSVAR  # type: ignore[attr-defined]  # the stdlib's field kinds
from dataclasses import _FIELD_INITVAR as _INITVAR  # type: ignore[attr-defined]
from dataclasses import MISSING, FrozenInstanceError
from typing import TYPE_CHECKING, Any, TypeVar

_C = TypeVar("_C", bound=type)

if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls: type | None = None, /, *, frozen: bool = False) -> Any:
        """dataclasses.dataclass (plain or frozen=True) without compiling source text at import.

        The stdlib's decorator writes __init__, __repr__, __eq__ (and a frozen class's
        __setattr__, __delattr__, __hash__) as text and exec()s each: about nine tenths of
        creating a class, and creating classes is a large share of a command's start-up (issue
        34). Here the stdlib still collects the fields (__dataclass_fields__: fields(), asdict(),
        replace() and pydantic read them), and the methods are shared functions that read a
        per-class spec. The type checker sees dataclasses.dataclass itself (TYPE_CHECKING)."""

        def wrap(cls: _C) -> _C:
            return _make_dataclass(cls, frozen)

        return wrap if cls is None else wrap(cls)


def _make_dataclass(cls: _C, frozen: bool) -> _C:
    own = cls.__dict__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not own.get("__doc__"):
        cls.__doc__ = cls.__name__  # the stdlib would build it with inspect.signature()
    _collect_fields(cls, own.get("__annotations__", {}))
    fields = dataclasses.fields(cls)
    # __init__'s parameters in the stdlib's order: the fields it takes and the InitVars (given
    # to __post_init__ in their order, never kept); a field it does not take but has a default
    # for is set from that (`fixed`).
    every = getattr(cls, "__dataclass_fields__").values()  # noqa: B009 - fields() leaves out InitVars
    taken = tuple((f.name, f.default, f.default_factory) for f in every if f.init and f._field_type is not _CLASSVAR)
    initvars = tuple(f.name for f in every if f._field_type is _INITVAR)
    fixed = tuple(
        (f.name, f.default, f.default_factory)
        for f in fields
        if not f.init and (f.default is not MISSING or f.default_factory is not MISSING)
    )
    params = getattr(cls, "__dataclass_params__")  # noqa: B009 - what the methods below make it
    params.init = params.repr = params.eq = True
    params.frozen = frozen
    spec = {
        "__llmc_init__": (taken, getattr(cls, "__post_init__", None), initvars, fixed),
        "__llmc_compare__": tuple(f.name for f in fields if f.compare),
        "__llmc_repr__": tuple(f.name for f in fields if f.repr),
    }
    for name, value in spec.items():
        setattr(cls, name, value)
    methods: dict[str, Callable[..., Any] | None] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
    if frozen:
        methods |= {"__setattr__": _frozen_set, "__delattr__": _frozen_del}
    if not explicit_hash:
        methods["__hash__"] = _hash if frozen else None
    for name, method in methods.items():
        if name not in own or name == "__hash__":
            setattr(cls, name, method)
    return cls


def _collect_fields(cls: type, annotations: dict[str, Any]) -> None:
    """The fields as the stdlib's decorator collects them (init, repr and eq made here): by
    _plain_fields for a class whose annotations are all strings (`from __future__ import
    annotations`) naming no ClassVar, InitVar or KW_ONLY, with no dataclass base (all of llmc's);
    else by the stdlib, each such string shown to it as `object` and given back to its field
    afterwards (its three regular-expression matches a string were two thirds of a field)."""
    plain = {
        name: a
        for name, a in annotations.items()
        if isinstance(a, str) and "ClassVar" not in a and "InitVar" not in a and "KW_ONLY" not in a
    }
    if _plain_fields(cls, annotations, len(plain)):
        return
    if plain:
        cls.__annotations__ = {name: object if name in plain else a for name, a in annotations.items()}
    try:
        dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    finally:
        if plain:
            cls.__annotations__ = annotations
    own: dict[str, dataclasses.Field[Any]] = getattr(cls, "__dataclass_fields__")  # noqa: B009
    for name, written in plain.items():
        own[name].type = written


# dataclasses' private parts that _plain_fields uses as _process_class does (Python 3.11's shape).
_FIELD, _PARAMS = getattr(dataclasses, "_FIELD", None), getattr(dataclasses, "_DataclassParams", None)  # type: Any, Any
_PLAIN_FIELDS = sys.version_info[:2] == (3, 11) and _FIELD is not None and _PARAMS is not None


def _plain_fields(cls: type, annotations: dict[str, Any], plain: int) -> bool:
    """dataclasses.dataclass(cls, init=False, repr=False, eq=False) as Python 3.11's
    _process_class does it, when the `plain` annotations are all `cls` has and no base is a
    dataclass: the same Field of each (a class default made a field(), a field()'s default put
    back on the class, a mutable default refused), __dataclass_params__, __dataclass_fields__,
    __match_args__ (tests/test_model_dataclass_fields.py). Without the rest of _process_class:
    ~100 k instructions a class, 34 in a `call --batch` start-up (issue 34). False otherwise."""
    if not _PLAIN_FIELDS or plain != len(annotations) or any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:]):
        return False
    cls.__dataclass_params__ = _PARAMS(False, False, False, False, False, False)  # type: ignore[attr-defined]
    fields: dict[str, dataclasses.Field[Any]] = {}
    own = cls.__dict__ if cls.__mro__[1:] == (object,) else None  # getattr's answer, without an AttributeError a field
    for name, written in annotations.items():
        default = own.get(name, MISSING) if own is not None else getattr(cls, name, MISSING)
        if isinstance(default, dataclasses.Field):
            made = default
        else:
            if isinstance(default, types.MemberDescriptorType):  # a slot's descriptor: no default
                default = MISSING
            made = dataclasses.field(default=default)  # type: ignore[arg-type]  # MISSING: none
        made.name, made.type, made._field_type = name, written, _FIELD  # type: ignore[attr-defined]
        made.kw_only = False if made.kw_only is MISSING else made.kw_only
        if made.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(made.default)} for field {name} is not allowed: use default_factory")
        fields[name] = made
        if default is made:  # the class attribute was the field(): its default, or none
            if made.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, made.default)
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        setattr(cls, "__match_args__", tuple(f.name for f in fields.values() if f.init and not f.kw_only))  # noqa: B010
    abc.update_abstractmethods(cls)
    return True


# A class built this often gets a compiled __init__ (as fast as the stdlib's): start-up builds most
# classes a few times at most, a batch or a long listing some of them thousands of times.
_COMPILE_AFTER = 32
_built: dict[type, int] = {}


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    fields, post_init, initvars, fixed = self.__llmc_init__
    count = _built[cls] = _built.get(cls, 0) + 1
    if count == _COMPILE_AFTER and cls.__dict__.get("__init__") is _init:
        _compile_init(cls, fields, post_init, initvars, fixed)
    if args:
        if len(args) > len(fields):
            raise TypeError(
                f"{cls.__qualname__}.__init__() takes {len(fields) + 1} positional arguments but {len(args) + 1} were given"
            )
        for (name, _, _), value in zip(fields, args, strict=False):
            if name in kwargs:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}")
            kwargs[name] = value
    state = self.__dict__
    for name, default, factory in fields:
        value = kwargs.pop(name, MISSING)
        if value is MISSING:
            if factory is not MISSING:
                value = factory()
            elif default is not MISSING:
                value = default
            else:
                raise TypeError(f"{cls.__qualname__}.__init__() missing 1 required argument: {name!r}")
        state[name] = value
    if kwargs:
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {next(iter(kwargs))!r}")
    for name, default, factory in fixed:
        state[name] = factory() if factory is not MISSING else default
    if initvars:
        given = [state.pop(name) for name in initvars]  # __post_init__'s, not the instance's
        if post_init is not None:
            post_init(self, *given)
    elif post_init is not None:
        post_init(self)


def _compile_init(
    cls: type,
    fields: tuple[tuple[str, Any, Any], ...],
    post_init: Any,
    initvars: tuple[str, ...] = (),
    fixed: tuple[tuple[str, Any, Any], ...] = (),
) -> None:
    """Give `cls` an __init__ written for its fields (what the stdlib's decorator writes at import)."""
    names = [name for name, _, _ in fields] + [name for name, _, _ in fixed]
    if any(name == "self" or name.startswith("_llmc") for name in names):
        return  # keep the generic one
    scope: dict[str, Any] = {"_llmc_missing": MISSING, "_llmc_post_init": post_init}
    params, body = [], ["    _llmc_state = self.__dict__"]
    for i, (name, default, factory) in enumerate(fields):
        if factory is not MISSING:
            scope[f"_llmc_factory{i}"] = factory
            params.append(f"{name}=_llmc_missing")
            body.append(f"    {name} = _llmc_factory{i}() if {name} is _llmc_missing else {name}")
            if name not in initvars:
                body.append(f"    _llmc_state[{name!r}] = {name}")
            continue
        if default is not MISSING:
            scope[f"_llmc_default{i}"] = default
        params.append(f"{name}=_llmc_default{i}" if default is not MISSING else name)
        if name not in initvars:
            body.append(f"    _llmc_state[{name!r}] = {name}")
    for i, (name, default, factory) in enumerate(fixed):
        scope[f"_llmc_fixed{i}"] = factory if factory is not MISSING else default
        body.append(f"    _llmc_state[{name!r}] = _llmc_fixed{i}{'()' if factory is not MISSING else ''}")
    if post_init is not None:
        body.append(f"    _llmc_post_init(self{''.join(', ' + name for name in initvars)})")
    try:
        exec(f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body), scope)
    except SyntaxError:  # a field without a default after one with: the generic __init__ reports it
        return
    made = scope["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    setattr(cls, "__init__", made)  # noqa: B010 - replacing a method at run time


def _repr(self: Any) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__llmc_repr__)
    return f"{type(self).__qualname__}({fields})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__llmc_compare__
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in self.__llmc_compare__))


def _frozen_set(self: Any, name: str, value: object) -> None:
    # As the stdlib's: a field, or any attribute of the decorated class itself, is frozen; a plain
    # subclass may set attributes of its own.
    if name in self.__dataclass_fields__ or type(self).__dict__.get("__setattr__") is _frozen_set:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_del(self: Any, name: str) -> None:
    if name in self.__dataclass_fields__ or type(self).__dict__.get("__delattr__") is _frozen_del:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:

    class _NamedTupleMeta(type):
        """typing.NamedTupleMeta less its _type_check of every annotation: under `from __future__
        import annotations` each is a string, made a ForwardRef and compiled, half of creating
        the class (issue 34: eight of them on a keeper call's path). The class is the same
        collections.namedtuple; its __annotations__ keep the strings (typing.get_type_hints
        reads them as it reads any class's). No Generic named tuples (none in llmc)."""

        def __new__(mcs, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
            if bases != (NamedTuple,):
                raise TypeError("llmc_cli.lean.NamedTuple: can only inherit from NamedTuple itself")
            annotations = ns.get("__annotations__", {})
            defaulted = [name for name in annotations if name in ns]
            if defaulted and defaulted != list(annotations)[-len(defaulted) :]:
                raise TypeError(f"{typename}: a namedtuple field without a default follows one with a default")
            made = collections.namedtuple(
                typename, list(annotations), defaults=[ns[n] for n in defaulted], module=ns["__module__"]
            )
            made.__annotations__ = made.__new__.__annotations__ = dict(annotations)
            for key, value in ns.items():
                if key in _NOT_SET:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in ("__module__", "__name__", "__annotations__") and key not in made._fields:
                    setattr(made, key, value)
            return made

    _NOT_SET = frozenset(
        (
            "__new__",
            "__init__",
            "__slots__",
            "__getnewargs__",
            "_fields",
            "_field_defaults",
            "_make",
            "_replace",
            "_asdict",
            "_source",
        )
    )
    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})


if TYPE_CHECKING:
    import hashlib
    from hashlib import sha256 as _builtin_sha256
else:
    try:  # CPython's own SHA-256 (3.11: _sha256, 3.12 on: _sha2), without OpenSSL
        from _sha256 import sha256 as _builtin_sha256
    except ImportError:
        try:
            from _sha2 import sha256 as _builtin_sha256
        except ImportError:
            from hashlib import sha256 as _builtin_sha256

# Importing hashlib initialises OpenSSL: ~3-6 ms of CPU (libcrypto's pages and relocations) for
# a `llmc call` that hashes a few kilobytes. CPython's own SHA-256 loads for free but hashes ~2.7
# ns a byte slower (a ~450-byte audit record: 1.85 us, OpenSSL's with the CPU's SHA instructions
# 0.67 us), so the load pays for itself past ~1-2 MB: a process switches to OpenSSL's once it has
# hashed 2 MiB (a batch of ~2,500 calls, a large result); same digests (bench/RESULTS.md, s. 18).
_OPENSSL_AFTER = 1 << 21
_sha256_state: list[Any] = [0, _builtin_sha256]  # bytes hashed so far, the constructor in use


def sha256(data: bytes = b"") -> hashlib._Hash:
    """hashlib.sha256(data), from whichever implementation is cheaper for this process so far."""
    if _sha256_state[0] >= 0:
        _sha256_state[0] += len(data)
        if _sha256_state[0] >= _OPENSSL_AFTER:
            _to_openssl()
    hashed: hashlib._Hash = _sha256_state[1](data)
    return hashed


def sha256_of() -> Callable[[bytes], hashlib._Hash]:
    """What sha256 above calls, for a caller that hashes many small texts at once (the audit
    seal, a record each): OpenSSL's constructor itself once the process moved to it (a batch
    does at its start), which saves a Python call a text; until then sha256, which counts."""
    return _sha256_state[1] if _sha256_state[0] < 0 else sha256


def expect_hashing(size: int) -> None:
    """A caller that will hash at least `size` more bytes (a batch: two audit records a call)
    moves to OpenSSL now when that takes the process past the switch anyway, not midway: a
    batch's HMACs (one a call, all before its first record is sealed) are then made on OpenSSL's
    copies, not on CPython's, three slow compressions each (~25 k instructions a call)."""
    if _sha256_state[0] >= 0 and _sha256_state[0] + size >= _OPENSSL_AFTER:
        _to_openssl()


def _to_openssl() -> None:
    import hashlib  # the seam above: OpenSSL only for a process that hashes much

    _sha256_state[:] = [-1, hashlib.sha256]


def sha256_hex(data: bytes) -> str:
    return sha256(data).hexdigest()


_HMAC_INNER = bytes(x ^ 0x36 for x in range(256))
_HMAC_OUTER = bytes(x ^ 0x5C for x in range(256))


_hmac_pads: dict[bytes, tuple[Any, Any, Any]] = {}  # a key's inner and outer hashes of its pads, and by whom


def hmac_sha256(key: bytes, message: bytes) -> str:
    """hmac.new(key, message, hashlib.sha256).hexdigest() (RFC 2104, as hmac.py computes it without
    OpenSSL), so that an approval hash does not load OpenSSL either. The hashes of a key's pads
    are made once and copied for each message (a process has one approval key: a batch hashes
    every call with it), made again once the process switched to OpenSSL's SHA-256: copies of
    CPython's own kept three of its slow compressions a call in every later HMAC."""
    pads = _hmac_pads.get(key)
    if pads is None or pads[2] is not _sha256_state[1]:
        padded = (sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
        pads = (sha256(padded.translate(_HMAC_INNER)), sha256(padded.translate(_HMAC_OUTER)), _sha256_state[1])
        if len(_hmac_pads) < 8 or key in _hmac_pads:
            _hmac_pads[key] = pads
    inner = pads[0].copy()
    inner.update(message)
    outer = pads[1].copy()
    outer.update(inner.digest())
    return outer.hexdigest()


# One encoder of each kind for the process: json.dumps with options builds a JSONEncoder on every
# call, a measurable share of a batch's CPU (several encodings per call). Where the C encoder is
# there, it is made once and called directly (JSONEncoder.encode makes one per call, in Python
# around it); without the circular-reference check, which needs a table per call: JSON values
# here come from a parser or are built by llmc, and a cycle would end in RecursionError instead
# of ValueError. The text is the same as json.dumps with these options gives.
def json_encoder(**options: Any) -> Callable[[object], str]:
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), **options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    basestring = json.encoder.encode_basestring
    encode = make(None, encoder.default, basestring, None, ":", ",", encoder.sort_keys, False, True)
    join = "".join
    return lambda value: join(encode(value, 0))


_scan_once: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner json.loads ends in


def json_loads(text: str) -> Any:
    """json.loads(text) of a str, the same value or the same error: the scanner is called
    directly on a text that is one JSON value with nothing around it (json.loads is three Python
    calls and two regular-expression matches around that call: a batch decodes two texts a
    call); anything else (white space around, an error) goes through json.loads itself."""
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)  # raises as json.loads raises, or reads what it reads after white space
    if end != len(text):
        return json.loads(text)
    return value


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block, and what the block made frozen after it (kept out
    of every later pass), in a process whose start-up the `llmc` entry froze the same way
    (llmc_cli/__main__.py, cli/main.py). For bounded work that makes long-lived objects and
    little garbage, which each pass would walk again for nothing: opening a command's target
    (~1.1 M instructions of a 1-call batch), a batch's decided calls (~7 k a call). Anywhere else
    (in-process callers, tests) nothing changes: their objects must not be frozen for good."""
    if not gc.isenabled() or not gc.get_freeze_count():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


# C0 controls but tab and newline (ESC starts CSI/OSC sequences, CR overwrites a line), DEL, C1
# controls (U+009B is a one-character CSI, U+009D an OSC), bidi embeddings, overrides, isolates and
# marks (they reorder what is shown: "Trojan Source"), line/paragraph separators, and lone
# surrogates (they cannot be encoded, so printing one would crash).
# The pattern's text: re compiles (and caches) it at the first clean(), not at import.
_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"


def clean(text: str) -> str:
    """Text from a server or a model, safe to show on a terminal: every control character is
    replaced by a visible escape (ESC becomes the four characters \\x1b); tab and newline stay."""
    return re.sub(_UNSAFE, _escape, text)


def clean_line(text: str) -> str:
    """clean(text) on one line: a newline in it (a server's error or tool name) is shown as \\n,
    so no text from a server can start a line of its own ("llmc: ..." that llmc never said)."""
    return clean(text).replace("\n", "\\n")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def nesting_depth(value: object, stop_at: int) -> int:
    """How deep JSON-like data nests (a scalar is 0, [] and {} are 1), counted without recursion;
    counting stops at `stop_at`. Level by level: a batch checks every line and every reply."""
    deepest = 0
    level: list[object] = [value]
    while True:
        below: list[object] = []
        nested = False
        for item in level:
            if isinstance(item, dict):
                nested = True
                below.extend(item.values())
            elif isinstance(item, (list, tuple)):
                nested = True
                below.extend(item)
        if not nested:
            return deepest
        deepest += 1
        if deepest >= stop_at:
            return deepest
        level = below

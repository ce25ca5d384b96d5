"""Tool arguments checked against the tool's inputSchema before anything is sent, a tool's
structured result against its outputSchema when it comes back, and the one
place that turns a schema into a validator (the seam for validators: a schema is compiled once
per definition, kept in a bounded cache, and compiled again when the definition changes).

A schema within the common subset (mcp/schema_subset.py) is checked by a compiled function and
arguments that pass it never touch jsonschema, which is slow to import; anything else, and any
arguments the subset refuses, go to a jsonschema validator, itself built once per definition.
`llmc call` through a keeper may have the keeper run this (keeper/transport.py
validate_in_keeper): the keeper keeps its compiled validators between calls."""

from __future__ import annotations

import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from llmc_cli.errors import ProtocolError, UsageError, did_you_mean
from llmc_cli.mcp.schema_subset import ASSERTIONS, Check, compile_check
from llmc_cli.model import canonical_json

T = TypeVar("T")


class CompiledSchemas(Generic[T]):
    """What `compile` makes of a schema, made once per definition. An entry is found by its owner
    (a tool's name; without one, the schema itself) and holds the schema's fingerprint (its
    canonical JSON): a definition that changes under the same owner is compiled again and the old
    compiled form dropped. At most `size` entries, the least recently used dropped first.
    `built` counts the compilations (tests, benchmarks). Thread-safe: the gateway and a keeper
    validate from several threads."""

    def __init__(self, compile: Callable[[Any], T], size: int = 512) -> None:
        self._compile = compile
        self._size = size
        # key -> (fingerprint, compiled form, the schema object it was made from)
        self._entries: OrderedDict[str, tuple[str, T, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.built = 0

    def get(self, schema: Any, owner: str | None = None) -> T:
        if owner is not None:  # the very object compiled last for this owner (a batch's calls of one
            # tool): no fingerprint needed. A changed definition arrives as a new object (a new listing).
            with self._lock:
                entry = self._entries.get("\x00" + owner)
                if entry is not None and entry[2] is schema:
                    self._entries.move_to_end("\x00" + owner)
                    return entry[1]
        fingerprint = canonical_json(schema)
        key = fingerprint if owner is None else "\x00" + owner  # an owner never collides with a schema
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == fingerprint:
                self._entries.move_to_end(key)
                return entry[1]
        compiled = self._compile(schema)  # outside the lock: jsonschema's check takes a while
        with self._lock:
            self.built += 1
            self._entries[key] = (fingerprint, compiled, schema)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return compiled

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _jsonschema_validator(schema: Any) -> Any:
    """A jsonschema validator for the schema, or None when the schema is itself broken (then the
    call goes ahead unchecked: that is the server's business)."""
    import jsonschema.exceptions  # the validators seam: jsonschema is imported here only

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except Exception:  # noqa: BLE001 - an unusable schema is not the user's error
        return None


def _exact(schema: Any) -> Check | None:
    return compile_check(schema, exact=True)


# One of each for the process: `llmc call`, a batch, the gateway and a keeper share them.
SUBSET_CHECKS: CompiledSchemas[Check | None] = CompiledSchemas(_exact)
VALIDATORS: CompiledSchemas[Any] = CompiledSchemas(_jsonschema_validator)


def validate_arguments(arguments: Mapping[str, Any], schema: Any, tool: str) -> None:
    """Check arguments against the tool's inputSchema before anything is sent: UsageError (exit 2)
    naming the argument and what was expected. A name the schema does not declare is refused when
    the schema forbids extra names, or when it is close to a declared one (a typo is far likelier
    than a deliberate undeclared argument). A schema that is itself broken, or refers to other
    documents, is the server's business: the call goes ahead unchecked.

    A null given for an optional property counts as leaving it out (it is still sent as given):
    models in strict mode send null for every optional property, and the spec asks clients to
    treat a null x-mcp-header value as absent, so servers commonly read null as "not provided"."""
    if passes_quickly(arguments, schema, tool):
        return
    error = _first_error(_checked(arguments, schema), schema, tool)
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = _first_missing(error)
        where = f"{where}.{missing}" if where else missing
        raise UsageError(f"{tool}: missing required argument {where!r}")
    expected = _expected(error)
    raise UsageError(f"{tool}: argument {where or '(all)'}: {expected}")


def check_structured(result: Mapping[str, Any], schema: Any, tool: str) -> None:
    """A tool's result against its outputSchema (2025-06-18 on): the server MUST return
    structuredContent that conforms, and a client SHOULD check, as the SDKs do. ProtocolError
    (exit 6: the server lied about its result) when it is missing or does not conform; an error
    result (isError) is not checked, and a schema that is itself broken is the server's business."""
    if not isinstance(schema, dict) or result.get("isError") is True:
        return
    structured = result.get("structuredContent")
    if not isinstance(structured, dict):
        raise ProtocolError(f"{tool}: the tool declares an outputSchema but its result has no structuredContent object")
    owner = tool + " outputSchema"  # not the owner of its inputSchema: each keeps its compiled form
    fast = SUBSET_CHECKS.get(schema, owner)
    if fast is not None and fast(structured, "") is None:
        return
    error = _first_error(structured, schema, owner)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(all)"
        expected = f"missing {_first_missing(error)!r}" if error.validator == "required" else _expected(error)
        raise ProtocolError(f"{tool}: the result's structuredContent does not match the tool's outputSchema: {where}: {expected}")


def _first_error(instance: object, schema: Any, owner: str) -> Any:
    """jsonschema's most relevant error of `instance` (None: valid, or the schema unusable)."""
    validator = VALIDATORS.get(schema, owner)
    if validator is None:
        return None
    try:
        # a validator exists, so _jsonschema_validator imported jsonschema (and its exceptions)
        return sys.modules["jsonschema.exceptions"].best_match(validator.iter_errors(instance))
    except Exception:  # noqa: BLE001 - an unresolvable $ref: not the user's error either
        return None


def _first_missing(error: Any) -> str:
    """The first required name a `required` error's instance lacks."""
    return next((name for name in error.validator_value if name not in (error.instance or {})), "?")


# passes_quickly of one schema: check(arguments, tool)
QuickCheck = Callable[[Mapping[str, Any], str], bool]


def passes_quickly(arguments: Mapping[str, Any], schema: Any, tool: str) -> bool:
    """The part of validate_arguments that needs no jsonschema: UsageError for an unknown
    argument it refuses; True when the arguments are valid (the compiled subset check passed,
    or there is no schema to check), False when jsonschema must decide. `llmc call` through a
    keeper asks its keeper only then."""
    return quick_check(schema, tool)(arguments, tool)


def quick_check(schema: Any, tool: str) -> QuickCheck:
    """passes_quickly for the arguments of many calls of one schema (a batch's of one tool):
    check(arguments, tool) is passes_quickly(arguments, schema, tool), the schema read once."""
    if not isinstance(schema, dict):
        return _valid
    known = _QUICK.get(id(schema))
    if known is None or known[0] is not schema:
        known = _quick(schema, tool)
    return known[1]


def _valid(arguments: Mapping[str, Any], tool: str) -> bool:
    return True  # no schema to check


# What passes_quickly reads of a schema, by the schema's identity (each entry holds the schema, so
# its id is not reused while kept): (schema, its check). A batch validates a thousand calls of
# one tool's schema.
_QUICK: dict[int, tuple[dict[str, Any], QuickCheck]] = {}
_QUICK_MAX = 512


def _quick(schema: dict[str, Any], tool: str) -> tuple[dict[str, Any], QuickCheck]:
    declared, required = schema.get("properties"), schema.get("required")
    properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
    needed: list[Any] = required if isinstance(required, list) else []
    forbid = schema.get("additionalProperties") is False
    fast = SUBSET_CHECKS.get(schema, tool)
    flat = _flat_types(schema, properties, needed) if fast is not None else None

    def check(arguments: Mapping[str, Any], tool: str) -> bool:
        if flat is not None and type(arguments) is dict:
            # Every property a scalar of one declared type (most tools): arguments of exactly
            # those types, each named, every required one given, pass what `fast` passes, in one
            # loop; anything else (a null, an unknown name, another type) takes the path below.
            for key, value in arguments.items():
                if type(value) not in flat.get(key, ()):
                    break
            else:
                for name in needed:  # (all() of a generator: ~1,000 instructions more a call)
                    if name not in arguments:
                        break
                else:
                    return True
        if properties:
            for key in arguments:
                if key not in properties:
                    hint = did_you_mean(key, properties)
                    if hint or forbid:
                        raise UsageError(
                            f"{tool}: unknown argument {key!r}{hint or ' (arguments: ' + ', '.join(properties) + ')'}"
                        )
        if fast is None:
            return False
        # the arguments as checked: a null for an optional property left out (most have no null: no copy)
        checked = (
            arguments if None not in arguments.values() else {k: v for k, v in arguments.items() if v is not None or k in needed}
        )
        return fast(checked, "") is None

    if len(_QUICK) >= _QUICK_MAX:
        _QUICK.clear()  # schemas of listings gone: start afresh (a schema is compiled once anyway)
    known = _QUICK[id(schema)] = (schema, check)
    return known


# The exact types of JSON's values a scalar type of a schema accepts (an integer's: never a bool,
# as the subset check: 1.0 is no integer there either).
_EXACT_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
}


def _flat_types(schema: dict[str, Any], properties: dict[str, Any], needed: list[Any]) -> dict[str, frozenset[type]] | None:
    """Each property's exact types, where the schema (one the subset compiles) asserts nothing
    but its type "object", its properties, `required` (names) and additionalProperties (a
    boolean), and each property nothing but one scalar "type": arguments of those types with
    every required name pass its check. None for any other schema."""
    if schema.get("type") != "object" or not properties or (schema.keys() & ASSERTIONS) - _FLAT_KEYWORDS:
        return None
    if not isinstance(schema.get("additionalProperties", True), bool) or not all(isinstance(n, str) for n in needed):
        return None
    types: dict[str, frozenset[type]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or (sub.keys() & ASSERTIONS) != {"type"} or sub.get("$schema") is not None:
            return None
        kind = sub["type"]
        if not isinstance(kind, str) or kind not in _EXACT_TYPES:
            return None
        types[name] = _EXACT_TYPES[kind]
    return types


_FLAT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})


def _checked(arguments: Mapping[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments as checked: a null for an optional property left out."""
    declared = schema.get("required")
    required: list[Any] = declared if isinstance(declared, list) else []
    return {k: v for k, v in arguments.items() if v is not None or k in required}


def _expected(error: Any) -> str:
    """What the schema wanted, in a few words ('expected integer, got \"x\"')."""
    got = json.dumps(error.instance, ensure_ascii=False)
    got = got if len(got) <= 60 else got[:57] + "..."
    if error.validator == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        return f"expected {wanted}, got {got}"
    if error.validator == "enum":
        return f"expected one of {', '.join(json.dumps(v) for v in error.validator_value)}, got {got}"
    message = str(error.message)
    return message if len(message) <= 200 else message[:197] + "..."

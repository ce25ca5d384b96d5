"""lean._plain_fields: the fields of a class whose annotations are all plain strings (every class of
llmc's, under `from __future__ import annotations`) collected without the stdlib's decorator, the
same as dataclasses.dataclass(init=False, repr=False, eq=False) collects them (issue 34: ~100 k
instructions a class at start-up). Each shape is made twice, once through each, and compared."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from llmc_cli import lean
from llmc_cli.config import schema

pytestmark = pytest.mark.skipif(not lean._PLAIN_FIELDS, reason="the fast path follows Python 3.11's dataclasses")


def shapes() -> list[type]:
    class Plain:
        a: int
        b: str = "x"
        c: list[int] = dataclasses.field(default_factory=list)
        d: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False, metadata={"m": 1})
        e: float | None = dataclasses.field(default=None, init=False)
        f: int = dataclasses.field(kw_only=True, default=3)
        g: tuple[int, ...] = dataclasses.field(default=(), hash=False)

    class Empty:
        pass

    class NoDefaultField:
        a: int = dataclasses.field(repr=False)
        b: int = 2

    class WithMatchArgs:
        __match_args__ = ("b",)
        a: int
        b: int = 1

    class Base:  # not a dataclass: its attribute is the default, as the stdlib reads it
        inherited = 7

    class FromBase(Base):
        inherited: int

    return [Plain, Empty, NoDefaultField, WithMatchArgs, FromBase]


def snapshot(cls: type) -> dict[str, Any]:
    fields = cls.__dict__["__dataclass_fields__"]
    params = cls.__dict__["__dataclass_params__"]
    return {
        "fields": [
            (
                f.name,
                f.type,
                f.default,
                f.default_factory,
                f.init,
                f.repr,
                f.hash,
                f.compare,
                dict(f.metadata),
                f.kw_only,
                f._field_type,
            )
            for f in fields.values()
        ],
        "params": repr(params),
        "match_args": cls.__dict__.get("__match_args__"),
        "class_attributes": {name: cls.__dict__.get(name, "absent") for name in fields},
        "annotations": inspect.get_annotations(cls),
    }


@pytest.mark.parametrize("index", range(len(shapes())))
def test_the_fields_are_the_stdlib_s(index: int) -> None:
    ours, theirs = shapes()[index], shapes()[index]
    assert lean._plain_fields(ours, inspect.get_annotations(ours), len(inspect.get_annotations(ours)))
    dataclasses.dataclass(theirs, init=False, repr=False, eq=False)
    assert snapshot(ours) == snapshot(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]


def test_the_same_errors_as_the_stdlib() -> None:
    def mutable() -> type:
        class Mutable:
            a: list[int] = []  # noqa: RUF012 - the mistake under test

        return Mutable

    def unannotated() -> type:
        class Unannotated:
            a: int = 1
            b = dataclasses.field(default=2)

        return Unannotated

    for make in (mutable, unannotated):
        with pytest.raises((ValueError, TypeError)) as theirs:
            dataclasses.dataclass(make(), init=False, repr=False, eq=False)
        cls = make()
        with pytest.raises(theirs.type, match=str(theirs.value).replace("(", r"\(").replace(")", r"\)")):
            lean._plain_fields(cls, inspect.get_annotations(cls), len(inspect.get_annotations(cls)))


def test_other_classes_are_left_to_the_stdlib() -> None:
    """A ClassVar, an InitVar, a type that is no string, a dataclass base: not plain."""

    class Parent:
        a: int = 1

    lean.dataclass(Parent)

    class Child(Parent):
        b: int = 2

    class Typed:
        a = 1

    Typed.__annotations__ = {"a": int}
    for cls, plain in ((Child, 1), (Typed, 0)):
        assert not lean._plain_fields(cls, inspect.get_annotations(cls), plain)
        assert "__dataclass_fields__" not in cls.__dict__


def test_the_program_s_classes_take_the_fast_path() -> None:
    """The profile schema's classes (18 of a start-up's 34) have the fields the stdlib gives."""
    for cls in (schema.Profile, schema.ServerConfig, schema.PolicyConfig, schema.ServeConfig):
        annotations = inspect.get_annotations(cls)
        assert all(isinstance(a, str) for a in annotations.values())
        twin = type(cls.__name__, (), {"__annotations__": dict(annotations), "__module__": cls.__module__})
        for f in dataclasses.fields(cls):
            setattr(twin, f.name, dataclasses.field(**_field_arguments(f)))
        dataclasses.dataclass(twin, init=False, repr=False, eq=False)
        assert [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(cls)] == [
            (f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(twin)
        ]


def _field_arguments(f: dataclasses.Field[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"init": f.init, "repr": f.repr, "hash": f.hash, "compare": f.compare, "metadata": f.metadata}
    if f.default is not dataclasses.MISSING:
        out["default"] = f.default
    if f.default_factory is not dataclasses.MISSING:
        out["default_factory"] = f.default_factory
    return out

"""llmc_cli.lean.dataclass, as model.py exports it (issue 34): the stdlib's dataclass without exec() at import. Each
case builds the same class with both decorators and checks they behave alike."""

from __future__ import annotations

import dataclasses
import pickle
import re
import typing
from dataclasses import field
from typing import Any, ClassVar

import pytest

from llmc_cli.config import schema
from llmc_cli.model import ServerSpec, dataclass


def pair(frozen: bool = False) -> list[Any]:
    """One class per decorator: a required field, a default, a default_factory, __post_init__."""
    made = []
    for decorate in (dataclasses.dataclass(frozen=frozen), dataclass(frozen=frozen)):

        class Point:
            x: int
            y: int = 2
            tags: list[str] = field(default_factory=list)

            def __post_init__(self) -> None:
                if self.x < 0:
                    raise ValueError("x must not be negative")

        made.append(decorate(Point))
    return made


@pytest.mark.parametrize("frozen", [False, True])
def test_construction_defaults_and_errors_match_the_stdlib(frozen: bool) -> None:
    for cls in pair(frozen):
        a, b = cls(1), cls(1, 5, ["t"])
        assert (a.x, a.y, a.tags) == (1, 2, [])
        assert (b.x, b.y, b.tags) == (1, 5, ["t"])
        assert cls(x=1, tags=["t"], y=5) == b and cls(1) == a and a != b
        assert cls(1).tags is not cls(1).tags  # a fresh list each time
        assert repr(b) == f"{cls.__qualname__}(x=1, y=5, tags=['t'])"
        assert cls.__match_args__ == ("x", "y", "tags")
        assert [f.name for f in dataclasses.fields(cls)] == ["x", "y", "tags"]
        assert dataclasses.asdict(b) == {"x": 1, "y": 5, "tags": ["t"]}
        assert dataclasses.replace(b, y=7).y == 7
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen is frozen
        with pytest.raises(TypeError, match=r"required argument: 'x'|missing 1 required"):
            cls()
        with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
            cls(1, z=3)
        with pytest.raises(TypeError, match="multiple values for argument 'x'"):
            cls(1, x=2)
        with pytest.raises(TypeError, match="positional arguments but 5 were given"):
            cls(1, 2, [], 4)
        with pytest.raises(ValueError, match="negative"):
            cls(-1)
        assert a.__eq__(object()) is NotImplemented


def test_hashing_and_assignment_follow_frozen() -> None:
    for plain in pair(frozen=False):
        assert plain.__hash__ is None  # eq without frozen: unhashable, as the stdlib makes it
        p = plain(1)
        p.y = 9
        assert p.y == 9
    for frozen in pair(frozen=True):
        f = frozen(1, 2, [])
        with pytest.raises(TypeError):
            hash(f)  # a list field: as unhashable as the stdlib's
        g = frozen(1, 3, ())
        assert hash(g) == hash(frozen(1, 3, ())) and {g: 1}[frozen(1, 3, ())] == 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            g.y = 4
        with pytest.raises(dataclasses.FrozenInstanceError):
            del g.y


def test_a_class_keeps_the_methods_it_defines() -> None:
    @dataclass(frozen=True)
    class Named:
        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("A") == Named("a") and hash(Named("A")) == hash(Named("a")) and repr(Named("A")) == "<A>"


def test_the_program_s_classes_pickle_and_the_profile_schema_validates() -> None:
    spec = ServerSpec(name="t", command=("python",))
    assert pickle.loads(pickle.dumps(spec)) == spec
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "u"  # type: ignore[misc]
    from llmc_cli.config.validation import adapter, dump

    profile = adapter(schema.Profile).validate_python({"servers": {"t": {"command": "x", "timeout": 5}}})
    assert profile.servers["t"] == schema.ServerConfig(command="x", timeout=5.0)
    assert schema.from_json(dump(profile)) == profile


@pytest.mark.parametrize("frozen", [False, True])
def test_a_class_built_often_gets_a_compiled_init_that_behaves_the_same(frozen: bool) -> None:
    stdlib, lite = pair(frozen)
    generic = lite.__init__
    for i in range(40):
        assert lite(i, tags=["t"]) == lite(i, 2, ["t"])
    assert lite.__init__ is not generic and lite.__init__.__qualname__ == f"{lite.__qualname__}.__init__"
    assert lite(1) == lite(x=1) and lite(1).tags is not lite(1).tags
    assert (lite(1, 5).x, lite(1, 5).y) == (stdlib(1, 5).x, stdlib(1, 5).y)
    for call in (lambda cls: cls(), lambda cls: cls(1, z=3), lambda cls: cls(1, x=2), lambda cls: cls(1, 2, [], 4)):
        with pytest.raises(TypeError) as ours:
            call(lite)
        with pytest.raises(TypeError) as theirs:
            call(stdlib)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="negative"):
        lite(-1)


def test_a_plain_subclass_of_a_frozen_class_may_set_its_own_attributes() -> None:
    for frozen in pair(frozen=True):

        class Sub(frozen):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                super().__init__(1)
                self.extra = 2

        sub = Sub()
        assert sub.extra == 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            sub.x = 3
        del sub.extra
        with pytest.raises(dataclasses.FrozenInstanceError):
            del sub.y


def test_fields_and_annotations_are_the_stdlib_s_with_classvars_initvars_and_subclasses() -> None:
    """lean shows the stdlib's field collection plain annotations as `object` (no regular
    expression for each): the fields, their types and the class's annotations come out the same."""
    made = []
    for decorate in (dataclasses.dataclass, dataclass):

        class Base:
            x: int
            label: str | None = None

        @decorate
        class Point(decorate(Base)):  # type: ignore[misc]
            kind: ClassVar[str] = "point"
            scale: dataclasses.InitVar[int] = 1
            tags: list[str] = field(default_factory=list)

        made.append(Point)
    ours, theirs = made[1], made[0]

    def shape(cls: Any) -> list[tuple[str, object, object]]:
        return [(f.name, f.type, f._field_type) for f in cls.__dataclass_fields__.values()]

    assert shape(ours) == shape(theirs) and [f.name for f in dataclasses.fields(ours)] == ["x", "label", "tags"]
    assert (
        ours.__annotations__
        == theirs.__annotations__
        == {"kind": "ClassVar[str]", "scale": "dataclasses.InitVar[int]", "tags": "list[str]"}
    )
    assert ours(2).tags == [] and ours.kind == "point" and typing.get_type_hints(ours)["tags"] == list[str]


def initvar_pair(frozen: bool = False) -> list[Any]:
    """One class per decorator with InitVars (one with a default) handed to __post_init__, and a
    field __init__ does not take, set from its default_factory."""
    made = []
    for decorate in (dataclasses.dataclass(frozen=frozen), dataclass(frozen=frozen)):

        class Scaled:
            x: int
            factor: dataclasses.InitVar[int]
            offset: dataclasses.InitVar[int] = 0
            seen: list[int] = field(default_factory=list, init=False)
            label: str = field(default="scaled", init=False)

            def __post_init__(self, factor: int, offset: int) -> None:
                object.__setattr__(self, "x", self.x * factor + offset)
                self.seen.append(factor)

        made.append(decorate(Scaled))
    return made


@pytest.mark.parametrize("frozen", [False, True])
def test_initvars_go_to_post_init_and_init_false_fields_get_their_defaults(frozen: bool) -> None:
    stdlib, lite = initvar_pair(frozen)
    for round_ in range(40):  # past _COMPILE_AFTER: the generic __init__, then the compiled one
        for cls in (stdlib, lite):
            made = cls(2, 3) if round_ % 2 else cls(x=2, factor=3, offset=1)
            offset = 0 if round_ % 2 else 1
            assert (made.x, made.seen, made.label) == (6 + offset, [3], "scaled")
            assert "factor" not in vars(made) and "offset" not in vars(made)  # never kept
            assert repr(made) == f"{cls.__qualname__}(x={6 + offset}, seen=[3], label='scaled')"
        assert lite(2, 3) == lite(2, 3) and lite(2, 3).seen is not lite(2, 3).seen
        for call in (lambda cls: cls(2), lambda cls: cls(2, 3, 4, 5), lambda cls: cls(2, 3, seen=[])):
            with pytest.raises(TypeError) as ours:
                call(lite)
            with pytest.raises(TypeError) as theirs:
                call(stdlib)
            # the same complaint about the same argument (the generic __init__ words it a little
            # differently; the compiled one as the stdlib)
            if round_ >= 32:
                assert str(ours.value) == str(theirs.value)
            assert re.findall(r"'\w+'", str(ours.value)) == re.findall(r"'\w+'", str(theirs.value))
    assert lite.__init__.__qualname__ == "initvar_pair.<locals>.Scaled.__init__"  # compiled by now
    assert [f.name for f in dataclasses.fields(lite)] == [f.name for f in dataclasses.fields(stdlib)] == ["x", "seen", "label"]

"""llmc_cli.lean.NamedTuple, as model.py exports it (issue 34): typing.NamedTuple without evaluating each annotation
at import. Each case builds the same class with both and checks they behave alike."""

from __future__ import annotations

import pickle
import typing
from typing import Any

import pytest

from llmc_cli import model
from llmc_cli.catalog.pool import ConnectOptions
from llmc_cli.keeper.transport import AttachReply


def pair() -> list[Any]:
    made = []
    for base in (typing.NamedTuple, model.NamedTuple):

        class Reply(base):  # type: ignore[misc, valid-type]
            """The reply."""

            era: str
            version: str | None = None
            notes: list[str] | None = None

            def described(self) -> str:
                return f"{self.era}/{self.version}"

            @property
            def modern(self) -> bool:
                return self.era == "modern"

        made.append(Reply)
    return made


def test_instances_behave_as_typing_namedtuples() -> None:
    for cls in pair():
        a: Any = cls("modern")
        b: Any = cls("legacy", "2025-11-25", ["x"])
        assert type(a).__bases__ == (tuple,) and tuple(a) == ("modern", None, None) and a == ("modern", None, None)
        assert (b.era, b.version, b.notes) == ("legacy", "2025-11-25", ["x"])
        assert a._replace(version="v") == cls("modern", "v") and a._asdict() == {"era": "modern", "version": None, "notes": None}
        assert cls._fields == ("era", "version", "notes") and cls._field_defaults == {"version": None, "notes": None}
        assert cls._make(["m", "v", None]).described() == "m/v" and a.modern and not b.modern
        assert repr(b) == "Reply(era='legacy', version='2025-11-25', notes=['x'])"
        assert cls.__doc__ == "The reply." and cls.__qualname__.endswith("pair.<locals>.Reply")
        assert cls.__module__ == __name__ and hash(a) == hash(("modern", None, None))
        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            cls()
        with pytest.raises(AttributeError):
            a.era = "x"


def test_annotations_are_kept_as_written_and_resolve() -> None:
    lean = pair()[1]
    assert lean.__annotations__ == {"era": "str", "version": "str | None", "notes": "list[str] | None"}
    assert typing.get_type_hints(AttachReply)["instructions"] == str | None


def test_what_typing_refuses_is_refused() -> None:
    for base in (typing.NamedTuple, model.NamedTuple):
        with pytest.raises(TypeError):

            class Wrong(base):  # type: ignore[misc, valid-type]
                a: int = 1
                b: int

        with pytest.raises(AttributeError):

            class Overwrites(base):  # type: ignore[misc, valid-type]
                a: int

                def _replace(self) -> None: ...


def test_llmc_named_tuples_pickle_and_compare() -> None:
    options = ConnectOptions(keeper=("/tmp/s.sock", "kb"))
    assert pickle.loads(pickle.dumps(options)) == options and options._replace(keeper=None).keeper is None
    assert type(options).__mro__[1] is tuple

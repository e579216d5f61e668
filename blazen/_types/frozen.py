"""How every blazen value is finished: frozen, with errors that say what to do instead."""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

_C = TypeVar("_C", bound=type)


class FrozenInstanceError(attrs.exceptions.FrozenInstanceError):
    """A blazen value was changed after it was built; build a new one instead."""

    def __init__(self, message: str) -> None:
        AttributeError.__init__(self, message)
        self.msg = message


def _refuse_set(self: object, name: str, _value: Any) -> None:
    msg = f"{type(self).__name__} is immutable: cannot set {name!r}; build a new value"
    raise FrozenInstanceError(msg)


def _refuse_delete(self: object, name: str) -> None:
    msg = f"{type(self).__name__} is immutable: cannot delete {name!r}"
    raise FrozenInstanceError(msg)


def _replace(self: Any, **changes: Any) -> Any:
    known = {a.alias for a in attrs.fields(type(self))}
    unknown = sorted(set(changes) - known)
    if unknown:
        msg = f"{type(self).__name__} has no field(s) {', '.join(unknown)}"
        raise TypeError(msg)
    return attrs.evolve(self, **changes)


def immutable(cls: _C) -> _C:
    """Finish an ``@attrs.frozen`` class the way every blazen value is finished.

    Besides what attrs gives (slots, value equality and hashing, pickling), an assignment
    names the class and says what to do instead, and ``__replace__`` (what ``copy.replace``
    calls on Python 3.13+) is there on every Python: an ``attrs.evolve`` that names a
    misspelt field.
    """
    built: Any = cls
    built.__setattr__ = _refuse_set
    built.__delattr__ = _refuse_delete
    built.__replace__ = _replace
    return cls

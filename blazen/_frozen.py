"""How every blazen value is finished: frozen, with errors that say what to do instead."""

from __future__ import annotations

import threading
from operator import attrgetter
from typing import Any, Callable, Optional, TypeVar

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


def builder_class(cls: type) -> Any:
    """A class with ``cls``'s slots, in order, that lets them be assigned.

    The hot path's fastest way to make a frozen value: an instance of it is filled slot by
    slot (each one plain attribute store, where a frozen class needs a descriptor call
    per field), then becomes a ``cls`` by assigning its ``__class__``, which CPython allows
    because the two have the same layout. Checked here once, at import: a ``cls`` whose
    layout it does not match (a slot added by attrs, say) fails loudly, never silently.
    Whoever uses it sets every slot; a test compares the value with the constructor's.
    """
    twin: Any = type(f"_Build{cls.__name__}", (), {"__slots__": cls.__slots__})  # type: ignore[attr-defined]
    probe = object.__new__(twin)
    probe.__class__ = cls  # TypeError if the layouts differ
    return twin


def by_value(cls: _C) -> _C:
    """Equality, hashing and a repr by field value, for an attrs class declared with
    ``eq=False, repr=False``: what attrs would generate, read from each field's own ``eq``,
    ``eq_key``, ``hash`` and ``repr`` settings.

    attrs compiles those methods afresh for every class at every import, a third of the
    time ``import blazen`` spends on its own values; these are built from plain functions.
    As attrs' do, equality compares field by field, stopping at the first that differs and
    handing back what that field's ``==`` returned (so NaN is not equal to itself), and the
    repr shows ``...`` for a value already being shown. A ``__repr__`` the class writes
    itself is kept.
    """
    fields = attrs.fields(cls)
    # eq_key is not in attrs' type stubs.
    compared = [(f.name, getattr(f, "eq_key", None)) for f in fields if f.eq]
    hashed = _key_of([f for f in fields if (f.eq if f.hash is None else f.hash)])
    salt = hash(f"{cls.__module__}.{cls.__qualname__}")
    shown = [(f.name, f.repr if callable(f.repr) else repr) for f in fields if f.repr]

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        result: Any = True
        for name, key in compared:
            mine, theirs = getattr(self, name), getattr(other, name)
            if key is not None:
                mine, theirs = key(mine), key(theirs)
            result = mine == theirs
            if not result:
                return result
        return result

    def __hash__(self: Any) -> int:
        return hash((salt, hashed(self)))

    def __repr__(self: Any) -> str:
        showing = _showing()
        if id(self) in showing:
            return "..."
        showing.add(id(self))
        try:
            name = self.__class__.__qualname__.rsplit(">.", 1)[-1]
            inner = ", ".join(f"{n}={show(getattr(self, n))}" for n, show in shown)
            return f"{name}({inner})"
        finally:
            showing.discard(id(self))

    built: Any = cls
    built.__eq__ = __eq__
    built.__hash__ = __hash__
    if "__repr__" not in cls.__dict__:
        built.__repr__ = __repr__
    return cls


_repr_context = threading.local()


def _showing() -> set[int]:
    """The values this thread is showing right now (a repr that reaches itself stops)."""
    showing: Optional[set[int]] = getattr(_repr_context, "showing", None)
    if showing is None:
        showing = _repr_context.showing = set()
    return showing


def _key_of(fields: list[attrs.Attribute[Any]]) -> Callable[[Any], Any]:
    """What a value is hashed by: its fields' values, each through its key."""
    names = [f.name for f in fields]
    keys = [getattr(f, "eq_key", None) for f in fields]  # not in attrs' type stubs
    if any(keys):
        pairs = list(zip(names, keys))
        return lambda v: tuple(
            getattr(v, n) if k is None else k(getattr(v, n)) for n, k in pairs
        )
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda v: (one(v),)
    return lambda v: ()

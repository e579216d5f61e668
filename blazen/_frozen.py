"""The base of blazen's immutable values: slots, value equality, hash, repr and pickling.

A value class declares its fields as ``__slots__`` with an annotation each (the annotations
give the order) and an ``__init__`` that validates its arguments and ends with
``self._fill(locals())``: every field is stored from the parameter of the same name.
Everything else comes from :class:`Frozen`. Plain classes cost microseconds to define where
a class-building library costs most of a millisecond each, and ``import blazen`` defines
a few dozen of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

__all__ = ["Frozen", "FrozenInstanceError"]

_F = TypeVar("_F", bound="Frozen")


class FrozenInstanceError(AttributeError):
    """A blazen value was changed after it was built; build a new one instead."""


def _restore(cls: type[_F], values: tuple[Any, ...]) -> _F:
    # Unpickling (and copy.copy/deepcopy): fill the slots without running __init__ again.
    obj = object.__new__(cls)
    for name, value in zip(cls._fields, values):
        object.__setattr__(obj, name, value)
    return obj


class Frozen:
    """Immutable value semantics for a class with ``__slots__``.

    Instances compare equal when they are of the same class and every field is equal, hash
    by their fields (so a value holding a dict is unhashable, as the dict is), print as
    ``Name(field=value, ...)``, pickle and copy, and refuse every attribute assignment.
    ``copy.replace(value, field=new)`` (Python 3.13+) or ``value.__replace__(...)`` builds a
    changed copy through ``__init__``, so the copy is validated like any new value.
    """

    __slots__ = ()

    #: The fields: the slots of the class and its bases, in the order they are annotated.
    _fields: ClassVar[tuple[str, ...]] = ()
    #: The ``__init__`` keyword of each field, when it is not the field's own name.
    _aliases: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        slots = cls.__dict__.get("__slots__", ())
        slots = {slots} if isinstance(slots, str) else set(slots)
        # Not inspect.get_annotations: importing inspect costs more than all of blazen.
        annotations = cls.__dict__.get("__annotations__")  # noqa: RUF063
        if annotations is None:  # Python 3.14+ may build them on first access instead
            annotations = getattr(cls, "__annotations__", {}) if slots else {}
        own = tuple(name for name in annotations if name in slots)
        if set(own) != slots:
            msg = f"{cls.__name__}: every slot needs an annotation ({sorted(slots - set(own))})"
            raise TypeError(msg)
        cls._fields = (*cls._fields, *own)

    def _fill(self, values: Mapping[str, Any]) -> None:
        """Store every field from ``values`` (an ``__init__``'s ``locals()``), by init name."""
        aliases = self._aliases
        for name in self._fields:
            object.__setattr__(self, name, values[aliases.get(name, name)])

    def __setattr__(self, name: str, value: Any) -> None:
        msg = f"{type(self).__name__} is immutable: cannot set {name!r}; build a new value"
        raise FrozenInstanceError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"{type(self).__name__} is immutable: cannot delete {name!r}"
        raise FrozenInstanceError(msg)

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.__class__.__qualname__, *self._values()))

    def _shown(self) -> dict[str, Any]:
        """What the repr shows: each field by its ``__init__`` name."""
        aliases = self._aliases
        return {aliases.get(n, n): v for n, v in zip(self._fields, self._values())}

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self._shown().items())
        return f"{type(self).__name__}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.__class__, self._values()))

    def __replace__(self: _F, **changes: Any) -> _F:
        values = Frozen._shown(self)  # the real values, whatever a subclass shows
        unknown = sorted(set(changes) - set(values))
        if unknown:
            msg = f"{type(self).__name__} has no field(s) {', '.join(unknown)}"
            raise TypeError(msg)
        values.update(changes)
        return type(self)(**values)

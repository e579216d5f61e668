"""What ``batch.run`` accepts: its arguments checked up front, its items read one by one."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator
from typing import Any, Union

from .._stream import ChatModel, check_callable
from .._types import CompletionRequest
from .work import RemoteModel

__all__ = ["Item", "check_arguments", "pairs"]

#: One input item: a request (its position is its id), or an ``(id, request)`` pair.
Item = Union[CompletionRequest, "tuple[str, CompletionRequest]"]


def pairs(requests: Iterable[Item]) -> Iterator[tuple[str, CompletionRequest]]:
    """``(id, request)`` for each item, read as asked for; ``TypeError`` names a bad one.

    Ids are unique in a run, given or positional: an id seen before (``[("1", a), b]``
    gives ``b`` the id ``"1"`` too) raises ``ValueError``, since ``out=`` would hold it
    twice and a resumed run would skip one of them. The ids seen are kept, as a resumed
    run keeps those already in ``out=``: a set of strings, not the requests.
    """
    seen: set[str] = set()
    for position, item in enumerate(requests):
        if isinstance(item, tuple) and len(item) == 2:
            item_id, req = item
            if not isinstance(item_id, str):
                msg = f"batch ids must be strings, got {type(item_id).__name__} at {position}"
                raise TypeError(msg)
        else:
            item_id, req = str(position), item
        if not isinstance(req, CompletionRequest):
            msg = (
                f"batch item {item_id!r} is a {type(req).__name__}: give CompletionRequest "
                "values, or (id, CompletionRequest) pairs"
            )
            raise TypeError(msg)
        if item_id in seen:
            how = "given" if isinstance(item, tuple) else "its position"
            msg = (
                f"batch item {position} has the id {item_id!r} ({how}), which an earlier "
                "item already has: ids must be unique in a run (give every item an id)"
            )
            raise ValueError(msg)
        seen.add(item_id)
        yield item_id, req


def check_arguments(
    model: Any, concurrency: Any, max_attempts: Any, executor: Any, on_chunk: Any, **cbs: Any
) -> None:
    """``TypeError``/``ValueError`` for arguments that cannot work, before anything runs."""
    if not isinstance(model, ChatModel):
        msg = f"model must come from blazen.Providers, got {type(model).__name__}"
        raise TypeError(msg)
    for name, value, low in (("concurrency", concurrency, 1), ("max_attempts", max_attempts, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            msg = f"{name} must be an int of at least {low}, got {value!r}"
            raise ValueError(msg)
    if executor is not None and not isinstance(executor, concurrent.futures.Executor):
        msg = f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}"
        raise TypeError(msg)
    if executor is not None:
        RemoteModel.of(model)
    if executor is not None and on_chunk is not None:
        msg = "on_chunk needs the run's own threads: it cannot stream back from executor="
        raise ValueError(msg)
    for name, cb in {"on_chunk": on_chunk, **cbs}.items():
        if cb is not None:
            check_callable(name, cb)

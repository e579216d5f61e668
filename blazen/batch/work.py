"""What runs for one item, on a pool thread or on another machine's worker.

:func:`run_item` is a module-level function of picklable arguments so that any
``concurrent.futures.Executor`` can run it, a Dask cluster included; it never raises for a
failed item: it returns the :class:`BatchResult` with the error in it.
"""

from __future__ import annotations

import queue
import threading
from typing import Optional, Union

import attrs

from .._cancel import CancelToken
from .._stream import ChatModel, Recipe, Streaming, revive
from .._types import CompletionRequest, StreamChunk
from ..errors import BlazenError, InternalError
from .results import BatchResult

__all__ = ["ItemChunk", "ItemLeft", "Pipe", "PipeItem", "RemoteModel", "run_item"]


@attrs.frozen
class ItemChunk:
    """A chunk of item ``id``, handed from its pool thread to the calling thread."""

    id: str
    chunk: StreamChunk


@attrs.frozen
class ItemLeft:
    """Item ``key`` (the run's own number for it) left the executor."""

    key: int


PipeItem = Union[ItemChunk, ItemLeft]


@attrs.frozen
class RemoteModel:
    """A model on its way to another process: the factory call that builds it there.

    Built inside :func:`run_item`, not while the task is unpickled, so a worker that cannot
    build it (no key in its environment) fails the item with that error instead of
    failing the executor's own machinery. One model per recipe per process (:func:`revive`).
    """

    recipe: Recipe

    @classmethod
    def of(cls, model: ChatModel) -> RemoteModel:
        """The recipe of ``model``; ``TypeError`` for a model not built by ``Providers``."""
        if model.recipe is None:
            msg = (
                f"executor= runs items in other processes, and {model!r} cannot be rebuilt "
                "there: build it with blazen.Providers"
            )
            raise TypeError(msg)
        return cls(model.recipe)


class Pipe:
    """Events from the pool's threads to the calling thread, in arrival order.

    Chunks take one of ``room`` slots, freed as the calling thread takes them: a slow
    ``on_chunk`` slows the streams and never grows memory. A done event takes no slot (at
    most one per item in flight), so posting one never blocks, whichever thread posts it.
    """

    def __init__(self, room: int) -> None:
        self._events: queue.SimpleQueue[PipeItem] = queue.SimpleQueue()
        self._room = threading.Semaphore(room)

    def chunk(self, event: ItemChunk, cancel: CancelToken) -> None:
        """Post a chunk, waiting for room; give up once ``cancel`` is set."""
        # Interrupted, the calling thread may stop taking chunks: the cancel ends the wait.
        while not self._room.acquire(timeout=0.05):
            if cancel.cancelled:
                return
        self._events.put(event)

    def done(self, event: ItemLeft) -> None:
        """Post that an item left the executor."""
        self._events.put(event)

    def get(self, timeout: float) -> Optional[PipeItem]:
        """The next event, or None after ``timeout`` seconds."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(event, ItemChunk):
            self._room.release()
        return event


class _Forward:
    """``on_chunk`` of one item on its pool thread: posts the chunk to the calling thread."""

    def __init__(self, item_id: str, pipe: Pipe, cancel: CancelToken) -> None:
        self.item_id = item_id
        self.pipe = pipe
        self.cancel = cancel

    def __call__(self, chunk: StreamChunk) -> None:
        self.pipe.chunk(ItemChunk(self.item_id, chunk), self.cancel)


def run_item(
    model: Union[ChatModel, RemoteModel],
    item_id: str,
    req: CompletionRequest,
    attempt: int,
    timeout: Optional[float],
    cancel: Optional[CancelToken] = None,
    pipe: Optional[Pipe] = None,
) -> BatchResult:
    """Stream one item to its end; the result holds the response or the error.

    ``attempt`` is unused here: it makes each try a distinct task for executors that
    cache results by their arguments (Dask's ``pure`` tasks).
    """
    del attempt
    errors: list[BlazenError] = []
    on_chunk = _Forward(item_id, pipe, cancel) if pipe is not None and cancel else None
    try:
        if isinstance(model, RemoteModel):
            model = revive(model.recipe)
    except BlazenError as exc:  # no key in this worker's environment, a bad option...
        return BatchResult(id=item_id, error=exc)
    try:
        response = Streaming.complete(
            model, req, on_chunk=on_chunk, on_error=errors.append, cancel=cancel, timeout=timeout
        )
    except Exception as exc:  # blazen reports through on_error; this is a bug, kept per item
        msg = f"batch item {item_id!r} failed unexpectedly: {type(exc).__name__}"
        return BatchResult(id=item_id, error=InternalError(msg))
    if errors:
        return BatchResult(id=item_id, error=errors[0])
    return BatchResult(id=item_id, response=response)

"""Embeddings for asyncio: the blocking call on a thread of its own, cancelled with the task."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING, Any, Optional

from .._cancel import CancelToken
from .._types import EmbeddingResponse
from .embedding import Inputs, check_embed, embed_blocking

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = ["embed_async"]


async def embed_async(
    model: BoundModel,
    inputs: Inputs,
    *,
    model_name: Optional[str] = None,
    dimensions: Optional[int] = None,
    timeout: Optional[float] = None,
    cancel: Optional[CancelToken] = None,
    concurrency: Optional[int] = None,
    batch_size: Optional[int] = None,
) -> EmbeddingResponse:
    """:func:`embed_blocking` for asyncio: the event loop never blocks; cancelling the
    task cancels the embedding (its connections torn down) before ``CancelledError``."""
    # Checked here, so a programming mistake raises at the await, not from a thread.
    check_embed(
        model,
        inputs,
        model_name=model_name,
        dimensions=dimensions,
        concurrency=concurrency,
        batch_size=batch_size,
    )
    loop = asyncio.get_running_loop()
    future: asyncio.Future[EmbeddingResponse] = loop.create_future()
    finished: asyncio.Future[None] = loop.create_future()
    token = CancelToken()
    own = [token] if cancel is None else [token, cancel]

    def settle(result: Any, failed: bool) -> None:
        if not future.done():
            if failed:
                future.set_exception(result)
            else:
                future.set_result(result)
        if not finished.done():
            finished.set_result(None)

    def run() -> None:
        # One thread of its own per call, not the loop's executor (which the application
        # may keep busy); it waits like a blocking caller, obeying either token.
        outer = CancelToken()
        unsubscribe = [t.subscribe(outer.cancel) for t in own]
        result: Any
        try:
            result = embed_blocking(
                model,
                inputs,
                model_name=model_name,
                dimensions=dimensions,
                timeout=timeout,
                cancel=outer,
                concurrency=concurrency,
                batch_size=batch_size,
            )
            failed = False
        except BaseException as exc:
            result, failed = exc, True
        finally:
            for unsub in unsubscribe:
                unsub()
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(settle, result, failed)

    threading.Thread(target=run, name="blazen-embed-async", daemon=True).start()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        token.cancel("the task was cancelled")
        # Its connections are torn down at once; the task ends once its workers are gone.
        try:
            await asyncio.shield(finished)
        finally:
            if future.done() and not future.cancelled():
                future.exception()  # retrieved, or asyncio logs it as never retrieved
        raise

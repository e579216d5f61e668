"""``StreamHandle``: a stream running in the background, as a ``concurrent.futures.Future``."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable, Optional

from .._cancel import CancelToken, tokens_for
from .._telemetry import attach, current_context, detach
from .._types import CompletionRequest, CompletionResponse
from ..errors import BlazenError
from .blocking import complete_blocking, how
from .delivery import ChunkCallback, Delivery, DoneCallback, ErrorCallback

if TYPE_CHECKING:
    from .model import BoundModel

__all__ = ["StreamHandle"]


def _forward(source: CancelToken, target: CancelToken) -> Callable[[], None]:
    return lambda: target.cancel(source.reason)


class StreamHandle(Future):  # type: ignore[type-arg]
    """A stream started by ``Streaming.start``.

    It is a ``concurrent.futures.Future`` of the :class:`CompletionResponse`, so
    ``concurrent.futures.wait`` and ``as_completed`` work with it. ``result()`` raises the
    stream's error (a :class:`~blazen.BlazenError`) when it failed, whether or not an
    ``on_error`` callback was given. ``cancel()`` ends a running stream: it finishes with
    :class:`~blazen.CancelledError` as its exception (not the Future's cancelled state).
    """

    _token: CancelToken
    _thread: threading.Thread
    _delivery: Optional[Delivery] = None
    _cancel_answer: Optional[bool] = None
    _cancel_lock: threading.Lock

    @classmethod
    def launch(
        cls,
        model: BoundModel,
        req: CompletionRequest,
        *,
        on_chunk: Optional[ChunkCallback],
        on_done: Optional[DoneCallback],
        on_error: Optional[ErrorCallback],
        cancel: Optional[CancelToken],
        timeout: Optional[float],
    ) -> StreamHandle:
        """Start ``req`` on a background thread (``Streaming.start`` checks the arguments)."""
        handle = cls()
        handle._cancel_lock = threading.Lock()
        token = handle._token = CancelToken()
        # The caller's token and its ambient one (captured now: the background thread
        # starts with an empty context) both cancel this stream, with their reason.
        unsubscribe = [t.subscribe(_forward(t, token)) for t in tokens_for(cancel)]
        failure: list[BlazenError] = []
        # The span current here is the stream span's parent, on the background thread too.
        parent = current_context()

        def record_error(err: BlazenError) -> None:
            failure.append(err)
            if on_error is not None:
                on_error(err)

        def run() -> None:
            if not handle.set_running_or_notify_cancel():
                return
            attached = attach(parent)
            try:
                response = complete_blocking(
                    model,
                    req,
                    on_chunk=on_chunk,
                    on_done=on_done,
                    on_error=record_error,
                    cancel=handle._token,
                    timeout=timeout,
                    on_start=handle._started,
                )
            except BaseException as exc:
                handle.set_exception(exc)
                return
            finally:
                detach(attached)
                for unsub in unsubscribe:
                    unsub()
            if failure:
                handle.set_exception(failure[0])
            else:
                handle.set_result(response)

        thread = handle._thread = threading.Thread(target=run, name="blazen-handle", daemon=True)
        try:
            thread.start()
        except BaseException as exc:
            # Ctrl-C (or a signal handler's exception) landed in the start, and no handle
            # goes back: nothing else could cancel a stream begun there. The future's own
            # state decides, under its lock: still pending, it is cancelled and the thread,
            # if it ever runs, begins no stream (no terminal is owed, as for a refused
            # argument); already running, the stream is cancelled and ends with one
            # on_error(CancelledError) on its thread, as an interrupted blocking call does.
            if Future.cancel(handle):
                for unsub in unsubscribe:
                    unsub()
            else:
                token.cancel(how(exc))
            raise
        return handle

    def _started(self, delivery: Delivery) -> None:
        self._delivery = delivery

    def cancel(self) -> bool:
        """Cancel the stream; True if it will end with ``CancelledError``.

        False when the handle has already finished (as ``Future.cancel`` says), or when the
        outcome was already decided (the end signal had been read and ``on_done`` is on its
        way). Callers racing each other before the end all get the same answer.
        """
        # One answer for all callers: a second cancel() racing the first must not read the
        # verdict before the first has made it.
        if self.done():
            return False
        with self._cancel_lock:
            if self._cancel_answer is None:
                self._token.cancel("StreamHandle.cancel()")
                delivery = self._delivery
                # Before the stream started, the cancel is seen at start: it wins.
                self._cancel_answer = delivery is None or delivery.cancel_won
            return self._cancel_answer

    def result(self, timeout: Optional[float] = None) -> CompletionResponse:
        """The response; raises the stream's error, or ``TimeoutError`` after ``timeout``."""
        response: CompletionResponse = super().result(timeout)
        return response

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait until the background thread, and so every callback, has finished."""
        self._thread.join(timeout)

"""The workflow builder: ``workflow(...)``, adding steps, and starting runs.

Each step accepts some event types and emits others; a run starts with a
``blazen::StartEvent`` carrying the run's data and ends at the first ``blazen::StopEvent``.
Independent events are handled concurrently, each step call on its own thread. A step may
call ``Streaming.complete`` without passing a token: the run's cancel token reaches it, so
the workflow's ``timeout_ms`` and cancelling the run stop the streams inside its steps.
The checks live in :mod:`.validate`, the engine of one run in :mod:`.run`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union, overload

if TYPE_CHECKING:
    import asyncio

    from .run import WorkflowRun

from .._cancel import CancelToken, tokens_for
from ..errors import CancelledError, ValidationError
from .events import Event, Step, StepHandler, WorkflowResult
from .validate import (
    handler_wants_ctx,
    is_coroutine_function,
    milliseconds,
    positive_int,
    problems,
    step_callable,
    step_types,
)

__all__ = ["DEFAULT_MAX_WORKERS", "Workflow", "workflow"]

F = TypeVar("F", bound=Callable[..., Any])
EventCallback = Callable[[Event], Any]

#: Step calls running at once in one run, unless ``max_workers=`` says otherwise.
DEFAULT_MAX_WORKERS = 8


def workflow(
    name: str, *, timeout_ms: Optional[float] = None, max_workers: int = DEFAULT_MAX_WORKERS
) -> Workflow:
    """A new, empty workflow; add steps with :meth:`Workflow.step`.

    Example::

        wf = blazen.workflow("streaming_greet").timeout_ms(30_000)

        @wf.step("greet", accepts=["blazen::StartEvent"], emits=["blazen::StopEvent"])
        def greet(event):
            resp = Streaming.complete(model, req)
            return Event.create(event_type="blazen::StopEvent",
                                data={"result": {"content": resp.content}})

        print(wf.run().result["content"])
    """
    return Workflow(name, timeout_ms=timeout_ms, max_workers=max_workers)


def _is_awaitable(value: Any) -> bool:
    import inspect  # on first use: `import blazen` does not pay for it

    return inspect.isawaitable(value)


class Workflow:
    """A set of named steps, run from a ``blazen::StartEvent`` to a ``blazen::StopEvent``.

    Build one with :func:`blazen.workflow`. One workflow may run any number of times, from
    any number of threads; each run uses the steps added before it started.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout_ms: Optional[float] = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        if not isinstance(name, str) or not name:
            msg = f"a workflow's name must be a non-empty string, got {name!r}"
            raise TypeError(msg)
        self._name = name
        self._timeout_ms = milliseconds("timeout_ms", timeout_ms)
        self._max_workers = positive_int("max_workers", max_workers, allow_none=False) or 1
        self._steps: dict[str, Step] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The workflow's name."""
        return self._name

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps, in the order they were added."""
        with self._lock:
            return tuple(self._steps.values())

    @property
    def budget_ms(self) -> Optional[float]:
        """The hard time budget of each run in milliseconds, or None for none."""
        return self._timeout_ms

    def __repr__(self) -> str:
        names = [s.name for s in self.steps]
        return f"Workflow({self._name!r}, steps={names!r}, timeout_ms={self._timeout_ms!r})"

    def timeout_ms(self, ms: Optional[float]) -> Workflow:
        """Set each run's hard wall-clock budget (None: none); returns the workflow.

        When it runs out, the streams inside running steps are cancelled, those steps are
        abandoned, and ``run`` raises :class:`blazen.TimeoutError`.
        """
        self._timeout_ms = milliseconds("timeout_ms", ms)
        return self

    @overload
    def step(
        self,
        name: str,
        *,
        accepts: Union[str, Iterable[str]],
        emits: Union[str, Iterable[str], None] = None,
        handler: None = None,
        timeout_ms: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> Callable[[F], F]: ...

    @overload
    def step(
        self,
        name: str,
        *,
        accepts: Union[str, Iterable[str]],
        emits: Union[str, Iterable[str], None] = None,
        handler: Union[Callable[..., Any], StepHandler],
        timeout_ms: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> Workflow: ...

    def step(
        self,
        name: str,
        *,
        accepts: Union[str, Iterable[str]],
        emits: Union[str, Iterable[str], None] = None,
        handler: Union[Callable[..., Any], StepHandler, None] = None,
        timeout_ms: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> Union[Callable[[F], F], Workflow]:
        """Add a step, as a decorator or (with ``handler=``) directly.

        ``handler(event)`` or ``handler(event, ctx)`` returns a :class:`StepOutput`, an
        :class:`Event`, a list of events, or None; ``handler=`` may also be an object whose
        ``invoke(event)`` or ``invoke(event, ctx)`` does (a :class:`StepHandler`, as in the
        Swift and Kotlin seeds). Either may be ``async``: under :meth:`run_async` the
        coroutine runs on the caller's event loop (and may ``await
        Streaming.complete_async``); under :meth:`run`, on an event loop of the step call's
        own thread. A step call that is abandoned (time budget, cancel, the run's end) has
        its task cancelled. ``"StartEvent"`` and ``"StopEvent"`` in ``accepts`` and
        ``emits`` mean the ``blazen::`` events. ``emits=None`` declares nothing and
        turns off the checks on what the step emits. ``timeout_ms`` limits each call of
        the step; ``max_concurrency`` caps how many of its calls run at once (default: as
        many as the workflow's ``max_workers``).
        """
        if not isinstance(name, str) or not name:
            msg = f"a step's name must be a non-empty string, got {name!r}"
            raise TypeError(msg)
        accepted, emitted = step_types(name, accepts, emits)
        limit = milliseconds("timeout_ms", timeout_ms)
        cap = positive_int("max_concurrency", max_concurrency, allow_none=True)

        def register(fn: F) -> F:
            call = step_callable(name, fn)
            wants_ctx = handler_wants_ctx(name, call)
            step = Step(
                name=name,
                accepts=accepted,
                emits=emitted,
                handler=call,
                wants_ctx=wants_ctx,
                timeout_ms=limit,
                max_concurrency=cap,
                is_async=is_coroutine_function(call),
            )
            with self._lock:
                if name in self._steps:
                    raise ValidationError(
                        f"workflow {self._name!r} already has a step named {name!r}"
                    )
                self._steps[name] = step
            return fn

        if handler is None:
            return register
        register(handler)  # type: ignore[type-var]
        return self

    def validate(self) -> None:
        """Raise :class:`blazen.ValidationError` naming every step and type that cannot work.

        ``run`` calls this first, so a broken workflow fails before any step runs.
        """
        found = problems(self.steps)
        if found:
            raise ValidationError(
                f"workflow {self._name!r} cannot run:\n" + "\n".join(f"- {p}" for p in found)
            )

    def _prepare(
        self,
        on_event: Optional[EventCallback],
        cancel: Optional[CancelToken],
        loop: Optional[asyncio.AbstractEventLoop] = None,
    ) -> WorkflowRun:
        # The engine (threads, queues, run ids) loads with the first run, not with blazen.
        from .run import WorkflowRun
        if on_event is not None and not callable(on_event):
            msg = f"on_event must be callable or None, got {type(on_event).__name__}"
            raise TypeError(msg)
        if cancel is not None and not isinstance(cancel, CancelToken):
            msg = f"cancel must be a blazen.CancelToken, got {type(cancel).__name__}"
            raise TypeError(msg)
        self.validate()
        # A workflow run inside another run's step obeys that step's token too.
        tokens = tuple(tokens_for(cancel))
        return WorkflowRun(
            workflow=self._name,
            steps=self.steps,
            timeout_ms=self._timeout_ms,
            max_workers=self._max_workers,
            on_event=on_event,
            tokens=tokens,
            loop=loop,
        )

    def run(
        self,
        data: Any = None,
        *,
        on_event: Optional[EventCallback] = None,
        cancel: Optional[CancelToken] = None,
    ) -> WorkflowResult:
        """Run to the StopEvent and return a :class:`WorkflowResult`; blocks.

        ``data`` (JSON-serialisable) is the StartEvent's data. ``on_event(event)`` sees
        every event in order of emission, on this thread, including those steps publish
        with ``ctx.publish`` (each one it accepted, before the StopEvent); if it raises,
        the run stops with a :class:`WorkflowError`.
        Raises :class:`WorkflowError` when a step raises or the run cannot go on,
        :class:`blazen.TimeoutError` when the time budget runs out and
        :class:`blazen.CancelledError` when ``cancel`` is cancelled.
        """
        if is_coroutine_function(on_event):
            msg = "on_event is a coroutine function: use run_async, or a plain function"
            raise TypeError(msg)
        return self._prepare(on_event, cancel).drive(data)

    async def run_async(
        self,
        data: Any = None,
        *,
        on_event: Optional[EventCallback] = None,
        cancel: Optional[CancelToken] = None,
    ) -> WorkflowResult:
        """:meth:`run` for asyncio: the run happens on a thread, the loop stays free.

        ``async`` step handlers run on this event loop, plain ones on threads.
        ``on_event`` runs on the event loop, in order, and may be a coroutine function.
        Cancelling the awaiting task cancels the run (and the streams in its steps).
        """
        import asyncio  # only async runs pay for importing asyncio

        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Optional[Event]] = asyncio.Queue()

        def forward(event: Event) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, event)

        # Async steps run on this loop; plain ones on threads, as under run().
        run = self._prepare(None if on_event is None else forward, cancel, loop)
        from .run import observer_error  # loaded by _prepare already
        done: asyncio.Future[WorkflowResult] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:  # on the loop
            if not done.cancelled():
                (done.set_result if ok else done.set_exception)(value)

        def drive() -> None:
            # Not the loop's default executor: it is small, and a run queued behind
            # others there would not start its time budget until a thread came free.
            ok = False
            value: Any = None
            try:
                value = run.drive(data)
                ok = True
            except BaseException as exc:
                value = exc
            # Nothing to report to if the loop has closed meanwhile.
            with contextlib.suppress(RuntimeError):
                if on_event is not None:
                    loop.call_soon_threadsafe(inbox.put_nowait, None)
                loop.call_soon_threadsafe(settle, ok, value)

        # The task's contextvars reach the steps, as the caller's do in run().
        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(drive,),
            name="blazen-workflow",
            daemon=True,
        )
        failed: Optional[BaseException] = None
        try:
            thread.start()
            if on_event is not None:
                while (event := await inbox.get()) is not None:
                    if failed is not None:
                        continue  # the run is stopping; observe nothing more
                    try:
                        shown = on_event(event)
                        if _is_awaitable(shown):
                            await shown
                    except Exception as exc:
                        failed = observer_error(self._name, event, exc)
                        failed.__cause__ = exc
                        run.abort(failed)
            result = await done
        except asyncio.CancelledError:
            done.cancel()  # whatever the run ends with now, nobody will read it
            run.abort(_task_cancelled(self._name))
            raise
        if failed is not None:
            raise failed
        return result


def _task_cancelled(name: str) -> CancelledError:
    return CancelledError(f"workflow {name!r} was cancelled: the awaiting task was cancelled")

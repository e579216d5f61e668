"""Workflows: named steps that route events from a StartEvent to a StopEvent.

Each step accepts some event types and emits others; a run starts with a
``blazen::StartEvent`` carrying the run's data and ends at the first ``blazen::StopEvent``.
Independent events are handled concurrently, each step call on its own thread. A step may
call ``Streaming.complete`` without passing a token: the run's cancel token reaches it, so
the workflow's ``timeout_ms`` and cancelling the run stop the streams inside its steps.
This module knows nothing of HTTP.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union, overload

if TYPE_CHECKING:
    import asyncio

from .._cancel import CancelToken, ambient_token
from ..errors import CancelledError, ValidationError
from .events import START_EVENT, STOP_EVENT, Event, Step, StepOutput, WorkflowResult
from .run import Context, WorkflowRun, observer_error

__all__ = [
    "START_EVENT",
    "STOP_EVENT",
    "Context",
    "Event",
    "StepOutput",
    "Workflow",
    "WorkflowResult",
    "workflow",
]

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


def _ms(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"{name} must be a number of milliseconds or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not value > 0 or math.isinf(value):
        msg = f"{name} must be a positive, finite number of milliseconds (or None), got {value}"
        raise ValueError(msg)
    return float(value)


def _positive_int(name: str, value: Optional[int], *, allow_none: bool) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        also = " or None" if allow_none else ""
        msg = f"{name} must be an int of at least 1{also}, got {value!r}"
        raise ValueError(msg)
    return value


def _types(what: str, step: str, value: Union[str, Iterable[str]]) -> tuple[str, ...]:
    # A lone string is one type name, not a sequence of one-letter types.
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Iterable):
        msg = f"{what} of step {step!r} must be a list of event type names"
        raise TypeError(msg)
    out = tuple(dict.fromkeys(items))
    for item in out:
        if not isinstance(item, str) or not item:
            msg = f"{what} of step {step!r} must hold non-empty strings, got {item!r}"
            raise TypeError(msg)
    return out


def _is_coroutine_function(fn: Any) -> bool:
    import inspect  # on first use: `import blazen` does not pay for it

    return inspect.iscoroutinefunction(fn)


def _is_awaitable(value: Any) -> bool:
    import inspect

    return inspect.isawaitable(value)


def _wants_ctx(name: str, handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` takes ``(event, ctx)`` rather than ``(event)``."""
    import inspect  # on first use: `import blazen` does not pay for it

    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if not positional:
        msg = f"the handler of step {name!r} must take the event (and optionally the context)"
        raise TypeError(msg)
    return len(positional) >= 2


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
        self._timeout_ms = _ms("timeout_ms", timeout_ms)
        self._max_workers = _positive_int("max_workers", max_workers, allow_none=False) or 1
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
        self._timeout_ms = _ms("timeout_ms", ms)
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
        handler: Callable[..., Any],
        timeout_ms: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> Workflow: ...

    def step(
        self,
        name: str,
        *,
        accepts: Union[str, Iterable[str]],
        emits: Union[str, Iterable[str], None] = None,
        handler: Optional[Callable[..., Any]] = None,
        timeout_ms: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> Union[Callable[[F], F], Workflow]:
        """Add a step, as a decorator or (with ``handler=``) directly.

        ``handler(event)`` or ``handler(event, ctx)`` returns a :class:`StepOutput`, an
        :class:`Event`, a list of events, or None. ``emits=None`` declares nothing and
        turns off the checks on what the step emits. ``timeout_ms`` limits each call of
        the step; ``max_concurrency`` caps how many of its calls run at once (default: as
        many as the workflow's ``max_workers``).
        """
        if not isinstance(name, str) or not name:
            msg = f"a step's name must be a non-empty string, got {name!r}"
            raise TypeError(msg)
        accepted = _types("accepts", name, accepts)
        emitted = None if emits is None else _types("emits", name, emits)
        if not accepted:
            raise ValidationError(f"step {name!r} accepts no event type")
        if STOP_EVENT in accepted:
            raise ValidationError(
                f"step {name!r} accepts {STOP_EVENT}, which ends the run and reaches no step"
            )
        if emitted is not None and START_EVENT in emitted:
            raise ValidationError(f"step {name!r} emits {START_EVENT}; only the run emits it")
        limit = _ms("timeout_ms", timeout_ms)
        cap = _positive_int("max_concurrency", max_concurrency, allow_none=True)

        def register(fn: F) -> F:
            if not callable(fn):
                msg = f"the handler of step {name!r} must be callable, got {type(fn).__name__}"
                raise TypeError(msg)
            if _is_coroutine_function(fn):
                msg = (
                    f"the handler of step {name!r} is a coroutine function; step handlers "
                    "are plain functions, each run on its own thread (run_async included)"
                )
                raise TypeError(msg)
            step = Step(
                name=name,
                accepts=accepted,
                emits=emitted,
                handler=fn,
                wants_ctx=_wants_ctx(name, fn),
                timeout_ms=limit,
                max_concurrency=cap,
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
        register(handler)
        return self

    def validate(self) -> None:
        """Raise :class:`blazen.ValidationError` naming every step and type that cannot work.

        ``run`` calls this first, so a broken workflow fails before any step runs.
        """
        problems = _problems(self.steps)
        if problems:
            raise ValidationError(
                f"workflow {self._name!r} cannot run:\n" + "\n".join(f"- {p}" for p in problems)
            )

    def _prepare(
        self, on_event: Optional[EventCallback], cancel: Optional[CancelToken]
    ) -> WorkflowRun:
        if on_event is not None and not callable(on_event):
            msg = f"on_event must be callable or None, got {type(on_event).__name__}"
            raise TypeError(msg)
        if cancel is not None and not isinstance(cancel, CancelToken):
            msg = f"cancel must be a blazen.CancelToken, got {type(cancel).__name__}"
            raise TypeError(msg)
        self.validate()
        # A workflow run inside another run's step obeys that step's token too.
        tokens = tuple({id(t): t for t in (cancel, ambient_token()) if t}.values())
        return WorkflowRun(
            workflow=self._name,
            steps=self.steps,
            timeout_ms=self._timeout_ms,
            max_workers=self._max_workers,
            on_event=on_event,
            tokens=tokens,
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
        with ``ctx.publish``; if it raises, the run stops with a :class:`WorkflowError`.
        Raises :class:`WorkflowError` when a step raises or the run cannot go on,
        :class:`blazen.TimeoutError` when the time budget runs out and
        :class:`blazen.CancelledError` when ``cancel`` is cancelled.
        """
        if _is_coroutine_function(on_event):
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

        ``on_event`` runs on the event loop, in order, and may be a coroutine function.
        Cancelling the awaiting task cancels the run (and the streams in its steps).
        """
        import asyncio  # only async runs pay for importing asyncio

        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Optional[Event]] = asyncio.Queue()

        def forward(event: Event) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, event)

        run = self._prepare(None if on_event is None else forward, cancel)
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


def _problems(steps: tuple[Step, ...]) -> list[str]:
    """Everything that would stop a run of these steps, named by step and event type."""
    problems: list[str] = []
    if not any(START_EVENT in s.accepts for s in steps):
        problems.append(f"no step accepts {START_EVENT}, so nothing would run")
    undeclared = [s.name for s in steps if s.emits is None]
    emitted = {t for s in steps for t in (s.emits or ())}
    accepted = {t for s in steps for t in s.accepts}
    if not undeclared:
        problems += [
            f"step {s.name!r} accepts {t!r}, but no step emits it"
            for s in steps
            for t in s.accepts
            if t != START_EVENT and t not in emitted
        ]
    problems += [
        f"step {s.name!r} emits {t!r}, but no step accepts it"
        for s in steps
        for t in s.emits or ()
        if t != STOP_EVENT and t not in accepted
    ]
    if steps and not problems:
        reached: dict[str, Step] = {}
        types = {START_EVENT}
        grew = True
        while grew:
            grew = False
            for s in steps:
                if s.name not in reached and types.intersection(s.accepts):
                    reached[s.name] = s
                    types.update(s.emits or ())
                    grew = True
        if STOP_EVENT not in types and not any(s.emits is None for s in reached.values()):
            problems.append(
                f"no step can reach {STOP_EVENT}: from {START_EVENT} the run reaches steps "
                f"{list(reached)!r}, which emit only {sorted(types - {START_EVENT})!r}"
            )
    return problems

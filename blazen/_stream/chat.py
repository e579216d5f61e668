"""``ChatModel``: the model users hold, a :class:`~.model.BoundModel` with its calls.

The engine reads a model only as a ``BoundModel`` (a wire format bound to a connection
pool); the calls that run on a model (``complete``, ``embed``, ``embed_async``) live here,
above the drivers they run on, as does pickling by the factory call that built a model.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._cancel import CancelToken
from .._http import shown_url
from .._types import CompletionRequest, CompletionResponse
from .blocking import complete_blocking
from .checks import check_controls, check_request
from .model import BoundModel

if TYPE_CHECKING:
    from .._types import EmbeddingResponse
    from .embedding import Inputs

__all__ = ["ChatModel", "Recipe", "revive"]

#: How many unpickled models a process keeps (a Dask worker unpickles one per task).
REVIVED_MODELS = 16
_revived: dict[bytes, ChatModel] = {}
_revived_lock = threading.Lock()


class Recipe:
    """The factory call that built a model, which is what the model pickles as.

    Its repr shows the factory only: the arguments may hold a key.
    """

    __slots__ = ("args", "factory", "kwargs")

    def __init__(
        self, factory: Callable[..., ChatModel], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.factory = factory
        self.args = args
        self.kwargs = kwargs

    def __call__(self) -> ChatModel:
        """Build the model again (in this process, from this process's environment)."""
        return self.factory(*self.args, **self.kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return Recipe, (self.factory, self.args, self.kwargs)

    def __repr__(self) -> str:
        return f"Recipe({getattr(self.factory, '__qualname__', 'factory')}(...))"


class ChatModel(BoundModel):
    """A model you can stream from; safe to share between threads.

    Build one with ``Providers.openai(...)`` (or any other provider) and hand it to
    ``Streaming.complete``. ``with model:`` closes its connections on the way out, as
    Kotlin's ``model.use { }`` does::

        with Providers.openai(model="gpt-4o-mini") as model:
            Streaming.complete(model, req, on_chunk=print)
    """

    #: The factory call that built this model (set by ``Providers``): what it pickles as.
    recipe: Optional[Recipe] = None

    def complete(
        self,
        req: CompletionRequest,
        *,
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
    ) -> CompletionResponse:
        """One non-streaming completion: the same errors, retries and response fields.

        Blocks until the response arrives; cancel, ``timeout`` and Ctrl-C behave as with
        ``Streaming.complete``. Raises the error on failure. Example::

            print(model.complete(Llm.completion_request([Llm.user("Hi")])).content)
        """
        check_request(req)
        check_controls({}, cancel, timeout)
        response = complete_blocking(self, req, cancel=cancel, timeout=timeout, stream=False)
        assert response is not None  # without an error handler failures raise
        return response

    def embed(
        self,
        inputs: Inputs,
        *,
        dimensions: Optional[int] = None,
        model: Optional[str] = None,
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
        concurrency: Optional[int] = None,
        batch_size: Optional[int] = None,
    ) -> EmbeddingResponse:
        """Embed a text or a list of texts: one vector per text, in order.

        Any number of texts: they go in batches of the provider's limit (or
        ``batch_size``), ``concurrency`` (4) at a time, each with the stream's retries,
        time limits and typed errors; ``timeout`` bounds the whole call. ``model`` names
        the embedding model for this call (else the factory's ``embedding_model=``, else
        the provider's default). Raises the first error; Ctrl-C and ``cancel`` stop every
        batch at once. Example::

            vectors = model.embed(["first text", "second text"]).vectors
        """
        from .embedding import embed_blocking  # the embedding engine loads on first use

        check_controls({}, cancel, timeout)
        return embed_blocking(
            self,
            inputs,
            model_name=model,
            dimensions=dimensions,
            timeout=timeout,
            cancel=cancel,
            concurrency=concurrency,
            batch_size=batch_size,
        )

    async def embed_async(
        self,
        inputs: Inputs,
        *,
        dimensions: Optional[int] = None,
        model: Optional[str] = None,
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
        concurrency: Optional[int] = None,
        batch_size: Optional[int] = None,
    ) -> EmbeddingResponse:
        """:meth:`embed` for asyncio; cancelling the task cancels the embedding."""
        from .embedding_aio import embed_async  # asyncio is loaded on first use

        check_controls({}, cancel, timeout)
        return await embed_async(
            self,
            inputs,
            model_name=model,
            dimensions=dimensions,
            timeout=timeout,
            cancel=cancel,
            concurrency=concurrency,
            batch_size=batch_size,
        )

    def __enter__(self) -> ChatModel:
        """The model itself: ``with Providers.openai(...) as model:``."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the pooled connections; an exception raised inside goes on."""
        self.close()

    def __reduce__(self) -> tuple[Callable[..., ChatModel], tuple[Any, ...]]:
        """Pickle as the factory call that built it, so a worker process can rebuild it.

        A key the factory read from the environment is not in the call: the worker reads
        the same variable from its own environment. A key passed as ``api_key=`` is.
        """
        if self.recipe is None:
            msg = (
                f"{self!r} cannot be pickled: only models built by blazen.Providers "
                "can be rebuilt in another process"
            )
            raise TypeError(msg)
        return revive, (self.recipe,)

    def __repr__(self) -> str:
        return (
            f"ChatModel(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={shown_url(self.base_url)!r})"
        )


def revive(recipe: Recipe) -> ChatModel:
    """The model ``recipe`` builds, shared by every unpickling of the same recipe.

    A Dask worker unpickles a task's model once per task: sharing one model (and its
    connection pool) per recipe keeps connections reused. At most :data:`REVIVED_MODELS`
    are kept, the oldest dropped first.
    """
    import pickle  # loaded by whoever unpickles a model; `import blazen` does not need it

    key = pickle.dumps(recipe)
    with _revived_lock:
        model = _revived.get(key)
    if model is not None:
        return model
    model = recipe()
    with _revived_lock:
        model = _revived.setdefault(key, model)
        while len(_revived) > REVIVED_MODELS:
            del _revived[next(iter(_revived))]
    return model

"""``Transport``: one model's pooled connections, and sending a request over them.

Two things here are not what a plain ``requests.post(stream=True)`` gives:

- **Teardown that works** (:mod:`.abort`): every socket a stream uses is registered with
  that stream's :class:`Abort`, which shuts it down on cancel, even mid-``recv``.
- **A request prepared once per model**: the URL and headers are parsed and validated on
  the first request and copied with each new body after that.
- **Proxy settings read once, when the model is built** (:func:`.urls.environ_proxy`): a
  setting requests could not use is refused then, naming its variable.

What comes back is a :class:`~.response.Response`, never a ``requests.Response``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, Callable, Optional

import requests
import requests.adapters

from .._version import __version__
from ..errors import BlazenError, CancelledError, ValidationError
from .abort import Abort, current
from .exceptions import Target
from .hooks import POOLS, own_pools
from .request import HttpRequest
from .response import Response
from .urls import Proxy, environ_proxy

__all__ = ["Transport"]

logger = logging.getLogger("blazen")

USER_AGENT = f"blazen-python/{__version__}"
#: Prepared request templates kept per model (distinct URL and header sets).
_PREPARED_CAP = 64


class _Adapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        own_pools(self.poolmanager, POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        own_pools(manager, POOLS)
        return manager

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # The model checked verify= when it was built; a CA bundle removed since is still
        # the setting's fault, not "the connection broke" worth two retries.
        try:
            super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
        except OSError as exc:
            msg = (
                f"verify={verify!r} cannot be used any more: {exc} (was the CA bundle moved "
                "or deleted? pass the path of a CA bundle, or True for the default CAs)"
            )
            raise ValidationError(msg) from None


class _NoCookies(requests.cookies.RequestsCookieJar):
    """A shared model must not carry one caller's cookies into another's request."""

    def set_cookie(self, *args: Any, **kwargs: Any) -> None:
        return None

    def extract_cookies(self, *args: Any, **kwargs: Any) -> None:
        return None  # nor parse the Set-Cookie headers of every response, only to drop them


# Every transport, so that a forked child can drop what it inherited (weakly: a model that
# is gone takes its transport with it).
_transports: weakref.WeakSet[Transport] = weakref.WeakSet()


class Transport:
    """One model's connection pool. Thread-safe; re-opens itself after :meth:`close`.

    After ``os.fork()`` the child starts with an empty pool: a pooled socket is shared by
    both processes, and two processes writing requests on one connection interleave them.

    ``url`` is the model's base URL: every request goes to its scheme and host, so the
    proxy settings read for it hold for all of them. Raises
    :class:`~blazen.ValidationError` when the proxy set for it could not be used.
    """

    def __init__(self, *, max_connections: int, verify: bool | str, url: str) -> None:
        self._max = max_connections
        self._verify = verify
        # Reading the proxy variables walks and decodes the whole environment, twice: that
        # was a quarter of the CPU a short stream costs. Like httpx, read them once per
        # client (here per model) rather than on every request.
        self._proxies, proxy = environ_proxy(url)
        #: The proxy this model's requests go through, or None.
        self.proxy: Optional[Proxy] = proxy
        self._prepared: dict[tuple[Any, ...], requests.PreparedRequest] = {}
        self._told_full = False
        self._fresh_state()
        _transports.add(self)

    def _fresh_state(self) -> None:
        self._lock = threading.Lock()
        self._session: Optional[requests.Session] = None
        # Bounds the connections in use at once; the pool keeps at most as many idle ones.
        self._slots = threading.BoundedSemaphore(self._max)

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's connections without touching them.

        Nothing is closed or shut down (that would end the parent's connections too); the
        child's copies of the descriptors close when the old pool is collected. Locks and
        slots start afresh: the threads that held them do not exist in the child.
        """
        self._fresh_state()

    @contextlib.contextmanager
    def slot(
        self, abort: Abort, waiting: Optional[Callable[[bool], None]] = None
    ) -> Iterator[None]:
        """Hold one of ``max_connections`` slots; waiting for one still obeys ``abort``.

        ``waiting(True)`` is called when the stream has to wait for a slot and
        ``waiting(False)`` once it has one: time spent waiting is not the provider's.
        """
        if not self._slots.acquire(blocking=False):
            if waiting is not None:
                waiting(True)
            if not self._told_full:
                # Once per model: a thread pool larger than the model's pool runs in waves.
                self._told_full = True
                logger.info(
                    "all %d connections of this model are in use; further streams wait for "
                    "one (raise max_connections= to run more at once)",
                    self._max,
                )
            self._wait_for_slot(abort)
            if waiting is not None:
                waiting(False)
        try:
            yield
        finally:
            self._slots.release()

    def _wait_for_slot(self, abort: Abort) -> None:
        start = time.monotonic()
        told_at = 1.0  # say so after a second, then at every doubling
        while not self._slots.acquire(timeout=0.05):
            if abort.aborted:
                raise CancelledError("the stream was cancelled while waiting for a connection")
            waited = time.monotonic() - start
            if waited >= told_at:
                told_at *= 2
                logger.info(
                    "a stream has waited %.0f s for one of this model's %d connections "
                    "(all are in use; raise max_connections= to run more at once)",
                    waited,
                    self._max,
                )

    def _get_session(self) -> requests.Session:
        session = self._session
        if session is None:
            with self._lock:
                session = self._session
                if session is None:
                    session = requests.Session()
                    session.cookies = _NoCookies()
                    adapter = _Adapter(pool_connections=4, pool_maxsize=self._max, max_retries=0)
                    session.mount("http://", adapter)
                    session.mount("https://", adapter)
                    self._session = session
        return session

    def _prepare(self, request: HttpRequest, stream: bool) -> requests.PreparedRequest:
        # requests prepares a request by parsing and re-validating its URL and every header
        # (0.13 ms, as much as a short stream's parsing). A model sends the same URL and
        # headers every time, so prepare them once and copy with the new body.
        key = (request.method, request.url, stream, *request.headers.items())
        template = self._prepared.get(key)
        if template is None:
            headers = {"User-Agent": USER_AGENT, **request.headers}
            if stream:
                # Compression buffers a stream; providers do not compress SSE anyway.
                headers.setdefault("Accept-Encoding", "identity")
            prepared = requests.Request(
                request.method, request.url, headers=headers, data=request.body
            ).prepare()
            if len(self._prepared) >= _PREPARED_CAP:
                self._prepared.clear()
            self._prepared[key] = prepared
            return prepared.copy()
        prepared = template.copy()
        prepared.body = request.body
        prepared.headers["Content-Length"] = str(len(request.body))
        return prepared

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    def open(
        self,
        request: HttpRequest,
        abort: Abort,
        *,
        provider: str,
        stream: bool,
        connect_timeout: Optional[float],
        read_timeout: Optional[float],
    ) -> Response:
        """Send ``request`` and return once the status and headers have arrived.

        Redirects are never followed: a redirect would carry the key to another host.
        Whatever the HTTP stack raises comes out as the blazen error that says what
        happened (see :func:`.exceptions.map_exception`), naming ``provider``.
        """
        target = Target(
            provider,
            request.url,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            proxy=self.proxy,
        )
        local = current()
        local.abort = abort
        try:
            if abort.aborted:
                raise CancelledError("the stream was cancelled before it was sent")
            prepared = self._prepare(request, stream)
            resp = self._get_session().send(
                prepared,
                stream=True,
                timeout=(connect_timeout, read_timeout),
                allow_redirects=False,
                verify=self._verify,
                proxies=self._proxies,
            )
            return Response(resp, abort, target)
        except BlazenError:
            raise
        except Exception as exc:
            raise target.error(exc) from exc
        finally:
            local.abort = None


def _after_fork_in_child() -> None:
    for transport in list(_transports):
        transport.forget_after_fork()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)

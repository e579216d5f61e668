"""``Response``: what the transport hands the stream layer, and all it may do with it.

Status, headers, the body's bytes read by read as they arrive, ``close()``/``release()``,
and :meth:`Response.check`, which says whether this is a response the caller can read at
all. The stream layer never sees a ``requests.Response`` nor any exception of the HTTP
stack: each method maps what the stack raises to a blazen error (:class:`.Target`), so a
change of HTTP library touches this folder only.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

import requests

from ..errors import BlazenError, ProviderError
from ..errors import TimeoutError as BlazenTimeoutError
from .abort import Abort
from .chunked import ChunkedBody, chunked_body
from .decoding import inflater_for
from .exceptions import Target, proxy_refused
from .hooks import raw_read1, response_socket
from .reader import read_elsewhere

__all__ = ["ErrorReader", "ReadBudget", "Response"]


_READ_SIZE = 65536
# What the reader's step returns to hand the body back to read().
_BACK = object()
_ERROR_BODY_CAP = 64 * 1024

#: A wire format's reader of an error response: ``(status, headers, body) -> error``.
ErrorReader = Callable[[int, Mapping[str, str], str], BlazenError]


class Response:
    """One HTTP response whose status and headers have arrived; the body is still unread."""

    __slots__ = (
        "_abort",
        "_before_read",
        "_chunked",
        "_inflater",
        "_inflating",
        "_limits",
        "_read1",
        "_resp",
        "_target",
        "headers",
        "status",
    )

    def __init__(self, resp: requests.Response, abort: Abort, target: Target) -> None:
        self._resp = resp
        self._abort = abort
        self._target = target
        # The chunked-body reader, made on first read and kept for the drain: it lives and
        # dies with this response.
        self._chunked: Optional[ChunkedBody] = None
        # Counts the changes of the read limits (limit_reads, unlimit_reads).
        self._limits = 0
        self._read1: Optional[Callable[[int], bytes]] = None
        # Called before each socket read of a close-delimited or sized body (a budget).
        self._before_read: Optional[Callable[[], None]] = None
        self.status: int = resp.status_code
        #: Case-insensitive, as HTTP header names are.
        self.headers: Mapping[str, str] = resp.headers
        self._inflater = inflater_for(self.headers.get("Content-Encoding", ""))
        # The inflated pieces of the last raw read still to hand out: one read of a gzip
        # bomb inflates to far more than the event cap, so it goes up a piece at a time.
        self._inflating: Optional[Iterator[bytes]] = None

    @property
    def content_type(self) -> str:
        """The media type alone, lower case (``""`` when there is none)."""
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()

    def check(self, read_error: ErrorReader, *, stream_types: Optional[tuple[str, ...]]) -> None:
        """Raise the error this response is, unless it is a 200 the caller can read.

        - 407: only a proxy answers it (RFC 9110, 15.5.8); the provider never saw the request.
        - 3xx: blazen does not follow redirects, which could carry the key elsewhere.
        - any other status but 200: the wire format's ``read_error(status, headers, body)``.
        - with ``stream_types`` (a streamed request), a 200 of another media type: a JSON
          error body read by ``read_error`` (status 200), anything else a
          :class:`~blazen.ProviderError` saying what came instead of an event stream.
        """
        status = self.status
        target = self._target
        if status == 407:
            raise proxy_refused(
                target.provider, target.proxy, status, "Proxy Authentication Required"
            )
        if status != 200:
            body = self.read_error_body()
            if 300 <= status < 400:
                raise ProviderError(
                    f"{target.provider} answered with a redirect ({status}) to "
                    f"{self.headers.get('Location') or '?'!r}; blazen does not follow "
                    "redirects (they could carry the key elsewhere): set base_url to the "
                    "final address",
                    provider=target.provider,
                    status=status,
                )
            raise read_error(status, self.headers, body)
        if stream_types is None:
            return
        ctype = self.content_type
        if ctype in stream_types:
            return
        body = self.read_error_body()
        if ctype == "application/json":
            try:
                payload: Any = json.loads(body)
            except ValueError:
                payload = None
            if isinstance(payload, dict) and payload.get("error") is not None:
                # Some servers send an error body with 200: it is the error all the same.
                raise read_error(200, self.headers, body)
        what = "an HTML page" if ctype == "text/html" else f"Content-Type {ctype or 'none'!r}"
        raise ProviderError(
            f"{target.provider} answered 200 with {what} instead of an event stream; is "
            f"base_url right? (request went to {target.url})",
            provider=target.provider,
            status=200,
            error_type="wrong_content_type",
            body=body[:4096],
        )

    def read(self) -> bytes:
        """The next bytes of the body, as soon as one socket read brings any; ``b""`` at its end.

        Chunked or close-delimited; a gzip or deflate body is read raw and inflated here
        (see :mod:`.decoding`), so each socket read is one step, timed like any other.
        """
        try:
            inflater = self._inflater
            while True:
                pieces = self._inflating
                if pieces is not None:
                    out = next(pieces, None)
                    if out is not None:
                        return out  # at most decoding's piece size: the cap sees each
                    self._inflating = None
                data = self._read_raw()
                if not data or inflater is None:
                    return data
                self._inflating = inflater.feed(data)
        except BlazenError:
            raise
        except Exception as exc:
            raise self._target.error(exc) from exc

    def read_elsewhere(
        self, take: Callable[[bytes], Any], aborted: Callable[[], bool]
    ) -> Any:
        """Read on :mod:`.reader`'s thread, calling ``take(data)`` there with what each read
        brings (as :meth:`read` returns it) until it returns a value; or None at once when
        this body cannot be read there.

        Returns ``take``'s value, or None when the body comes back to :meth:`read` (its end,
        or the reader could not go on): :meth:`read` then goes on where it stopped. What
        ``take`` raised is raised here; a read that failed raises the blazen error
        :meth:`read` would have raised.
        """
        if self._inflater is not None or self._inflating is not None:
            return None
        chunked = self._chunked
        sock = None if chunked is None else chunked.shared_socket
        if chunked is None or sock is None:
            return None
        push = chunked.push
        broken: list[Exception] = []  # a chunk that could not be read
        raised: list[BaseException] = []  # what take raised

        def step(data: bytes) -> Any:
            try:
                piece = push(data)
            except Exception as exc:
                broken.append(exc)
                return _BACK
            if piece:
                limits = self._limits
                try:
                    value = take(piece)
                except BaseException as exc:
                    raised.append(exc)
                    return _BACK
                if value is not None:
                    return value
                if self._limits != limits:
                    # The reads were timed (or untimed) by take: such reads, and the socket
                    # timeout they set, are the worker's.
                    return _BACK
            # Ended, or broken after the data it gave (its next read raises): the worker
            # reads on, as read() does.
            return _BACK if chunked.shared_socket is None else None

        outcome = read_elsewhere(sock, step, aborted, self._target.read_timeout)
        if raised:
            raise raised[0]
        if broken:
            # As read() raises a broken chunk: mapped to the blazen error that says so.
            raise self._target.error(broken[0]) from broken[0]
        if outcome is None or outcome[1] is _BACK:
            return None
        failed, value = outcome
        if failed:  # the read itself failed (a reset connection, say)
            raise self._target.error(value) from value
        return value

    def _read_raw(self) -> bytes:
        chunked = self._chunked_body()
        if chunked is not None:
            return chunked.read()
        read1 = self._read1
        if read1 is None:
            # iter_content on a close-delimited body waits for a full buffer; read1 returns
            # whatever one recv gave.
            read1 = self._read1 = raw_read1(self._resp.raw)
        if self._before_read is not None:
            self._before_read()
        return read1(_READ_SIZE)

    def _bytes(self) -> Iterator[bytes]:
        while True:
            data = self.read()
            if not data:
                return
            yield data

    def _chunked_body(self) -> Optional[ChunkedBody]:
        if self._chunked is None:
            # blazen decodes every body itself (read): it is framed here raw. The socket
            # only while the connection still owns it (not one a close-delimited answer
            # took over).
            self._chunked = chunked_body(self._resp, response_socket(self._resp.raw))
        return self._chunked

    def read_body(self, cap: int, within: Optional[float] = None) -> str:
        """The whole (non-streamed) body as text, refusing one larger than ``cap``.

        With ``within``, the body must have arrived that many seconds after its headers: a
        server sending a byte at a time would otherwise hold the call for as long as it
        likes, since each read gets a fresh socket timeout.
        """
        provider = self._target.provider
        spend = None if within is None else self._budget(within)
        parts: list[bytes] = []
        size = 0
        try:
            if spend is not None:
                spend()
            for data in self._bytes():
                parts.append(data)
                size += len(data)
                if size > cap:
                    break
                if spend is not None:
                    spend()
        except Exception as exc:
            # The budget's own TimeoutError, or a read's (blazen's TimeoutError is one too).
            if spend is None or not (isinstance(exc, TimeoutError) or spend.spent()):
                if isinstance(exc, BlazenError):
                    raise
                raise self._target.error(exc) from exc
            assert within is not None
            raise BlazenTimeoutError(
                f"{provider} did not finish sending its response within the idle timeout "
                f"of {within:g} s (it trickled the body); the call was stopped (raise "
                "idle_timeout= for slow servers)",
                limit="idle",
                seconds=within,
                provider=provider,
            ) from exc
        if size > cap:
            raise ProviderError(
                f"{provider} sent a response larger than {cap} bytes; it was not read "
                "(raise max_event_bytes if this is expected)",
                provider=provider,
                error_type="response_too_large",
            )
        try:
            return b"".join(parts).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProviderError(
                f"{provider} sent a response that is not valid UTF-8", provider=provider
            ) from exc

    def read_error_body(self) -> str:
        """Up to 64 KiB of an error response's body, decoded leniently; closes the response."""
        resp = self._resp
        try:
            data = resp.raw.read(_ERROR_BODY_CAP, decode_content=False)
        except Exception:
            data = b""
        finally:
            resp.close()
        data = _decoded(data, self.headers.get("Content-Encoding", ""), _ERROR_BODY_CAP)
        encoding = resp.encoding or "utf-8"
        try:
            return data.decode(encoding, errors="replace")
        except LookupError:
            return data.decode("utf-8", errors="replace")

    def release(self, *, budget: float = 1.0) -> None:
        """Return a finished response's connection to the pool, or close it.

        After the end signal most servers end the body at once. Reading the rest is only
        worth it to reuse the connection, so it gets ``budget`` seconds in all, however the
        server trickles bytes; past that, or if the stream is aborted meanwhile (the
        socket stays attached to the abort until the drain is over), the connection is
        closed instead of pooled. It never raises: a drain that fails closes.
        """
        resp = self._resp
        if self._abort.aborted:
            resp.close()
            return
        raw = resp.raw
        try:
            spend = self._budget(budget)
            spend()
            for _ in self._bytes():
                spend()
        except Exception:
            resp.close()
            return
        # A pooled socket may serve another stream next: no later abort may touch it.
        if not self._abort.detach():
            resp.close()
            return
        try:
            raw.release_conn()
        except Exception:
            resp.close()

    def limit_reads(self, seconds: float) -> ReadBudget:
        """From now on the socket reads get ``seconds`` in all (then they raise).

        For reading on past an end signal that may not be the last (Gemini's finishReason):
        ``spent()`` on the result says whether a read failed because the time ran out.
        """
        self._limits += 1
        return self._budget(seconds)

    def unlimit_reads(self) -> None:
        """Undo :meth:`limit_reads`: each socket read waits up to the read timeout again.

        For an answer that went on after an end signal that was not its last.
        """
        self._limits += 1
        budget = self._before_read
        self._before_read = None
        if self._chunked is not None:
            self._chunked.before_read = None
        sock = budget.sock if isinstance(budget, _Budget) else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(self._target.read_timeout)

    def _budget(self, seconds: float) -> _Budget:
        """A check to run before every socket read: the reads get ``seconds`` in all."""
        # The socket the abort holds first: http.client sets ``conn.sock`` to None as soon as
        # a close-delimited (or ``Connection: close``) response begins, and a budget with no
        # socket to time out let the drain after [DONE] wait for idle_timeout.
        sock = self._abort.attached_socket
        budget = _Budget(seconds, response_socket(self._resp.raw) if sock is None else sock)
        chunked = self._chunked_body()
        if chunked is not None:
            chunked.before_read = budget  # the chunked reader checks before each read itself
        self._before_read = budget
        return budget

    def close(self) -> None:
        """Close the connection; it is not reused. It never raises."""
        # Already broken: closing what is left cannot fail the stream.
        with contextlib.suppress(Exception):
            self._resp.close()

    def location(self) -> Optional[str]:
        """Where a redirect points, if anywhere."""
        return self.headers.get("Location")


def _decoded(data: bytes, encoding: str, cap: int) -> bytes:
    """Up to ``cap`` bytes of ``data`` decoded; what decoded before an error, if one comes."""
    inflater = inflater_for(encoding)
    if inflater is None:
        return data
    out = bytearray()
    try:
        for piece in inflater.feed(data):
            out += piece
            if len(out) >= cap:
                break
    except Exception:
        pass  # a body cut at the cap, or not what it claims: keep what it gave
    return bytes(out[:cap])


class ReadBudget:
    """What :meth:`Response.limit_reads` returns: ask :meth:`spent` after a failed read."""

    __slots__ = ()

    def spent(self) -> bool:
        """Whether the time is up."""
        raise NotImplementedError


class _Budget(ReadBudget):
    """Time for a run of socket reads in all: call it before each read.

    It raises the builtin ``TimeoutError`` once the time is spent, and otherwise gives the
    next read only what is left.
    """

    __slots__ = ("deadline", "sock")

    def __init__(self, seconds: float, sock: Any) -> None:
        self.deadline = time.monotonic() + seconds
        self.sock = sock

    def __call__(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the time for reading the body is spent")
        sock = self.sock
        if sock is not None:
            try:
                sock.settimeout(left)
            except OSError:
                # http.client closes the socket itself once a Content-Length body under
                # ``Connection: close`` is all read; the read that follows returns b""
                # without it. A socket closed any other way fails that read instead.
                self.sock = None

    def spent(self) -> bool:
        """Whether the time is up (a socket timeout it set surfaces as urllib3's error)."""
        return time.monotonic() >= self.deadline

"""``Response``: what the transport hands the stream layer, and all it may do with it.

Status, headers, the body's bytes as they arrive, and ``close()``/``release()``. The stream
layer never sees a ``requests.Response``: a change of HTTP library touches this folder only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

import requests

from ..errors import ProviderError
from ..errors import TimeoutError as BlazenTimeoutError
from .abort import Abort
from .chunked import ChunkedBody, chunked_body
from .decoding import inflater_for

__all__ = ["ReadBudget", "Response"]


_READ_SIZE = 65536
_ERROR_BODY_CAP = 64 * 1024


class Response:
    """One HTTP response whose status and headers have arrived; the body is still unread."""

    __slots__ = ("_abort", "_before_read", "_chunked", "_resp", "headers", "status")

    def __init__(self, resp: requests.Response, abort: Abort) -> None:
        self._resp = resp
        self._abort = abort
        # The chunked-body reader, made on first read and kept for the drain: it lives and
        # dies with this response.
        self._chunked: Optional[ChunkedBody] = None
        # Called before each socket read of a close-delimited or sized body (a budget).
        self._before_read: Optional[Callable[[], None]] = None
        self.status: int = resp.status_code
        #: Case-insensitive, as HTTP header names are.
        self.headers: Mapping[str, str] = resp.headers

    @property
    def content_type(self) -> str:
        """The media type alone, lower case (``""`` when there is none)."""
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield body bytes as soon as the socket has any, chunked or close-delimited.

        A gzip or deflate body is read raw and inflated here (see :mod:`.decoding`), so
        each socket read is one step, timed like any other.
        """
        resp = self._resp
        raw = resp.raw
        inflater = inflater_for(self.headers.get("Content-Encoding", ""))
        chunked = self._chunked_body()
        if chunked is not None:
            while True:
                data = chunked.read()
                if not data:
                    return
                if inflater is None:
                    yield data
                else:
                    yield from inflater.feed(data)
        # iter_content on a close-delimited body waits for a full buffer; read1 returns
        # whatever one recv gave. urllib3 >= 2 has read1 (raw here: blazen decodes);
        # older versions expose http.client's response, raw too, as _fp.
        read1: Callable[[int], bytes]
        if hasattr(raw, "read1"):
            read1 = functools.partial(raw.read1, decode_content=False)
        else:
            read1 = raw._fp.read1  # type: ignore[union-attr]

        while True:
            if self._before_read is not None:
                self._before_read()
            data = read1(_READ_SIZE)
            if not data:
                return
            if inflater is None:
                yield data
            else:
                yield from inflater.feed(data)

    def _chunked_body(self) -> Optional[ChunkedBody]:
        if self._chunked is None:
            # blazen decodes every body itself (iter_bytes): it is framed here raw.
            self._chunked = chunked_body(self._resp)
        return self._chunked

    def read_body(self, cap: int, provider: str, within: Optional[float] = None) -> str:
        """The whole (non-streamed) body as text, refusing one larger than ``cap``.

        With ``within``, the body must have arrived that many seconds after its headers: a
        server sending a byte at a time would otherwise hold the call for as long as it
        likes, since each read gets a fresh socket timeout.
        """
        spend = None if within is None else self._budget(within)
        parts: list[bytes] = []
        size = 0
        try:
            if spend is not None:
                spend()
            for data in self.iter_bytes():
                parts.append(data)
                size += len(data)
                if size > cap:
                    break
                if spend is not None:
                    spend()
        except Exception as exc:
            if spend is None or not (isinstance(exc, TimeoutError) or spend.spent()):
                raise
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
        closed instead of pooled.
        """
        resp = self._resp
        if self._abort.aborted:
            resp.close()
            return
        raw = resp.raw
        spend = self._budget(budget)
        try:
            spend()
            for _ in self.iter_bytes():
                spend()
        except Exception:
            resp.close()
            return
        # A pooled socket may serve another stream next: no later abort may touch it.
        if not self._abort.detach():
            resp.close()
            return
        raw.release_conn()

    def limit_reads(self, seconds: float) -> ReadBudget:
        """From now on the socket reads get ``seconds`` in all (then they raise).

        For reading on past an end signal that may not be the last (Gemini's finishReason):
        ``spent()`` on the result says whether a read failed because the time ran out.
        """
        return self._budget(seconds)

    def _budget(self, seconds: float) -> _Budget:
        """A check to run before every socket read: the reads get ``seconds`` in all."""
        connection = getattr(self._resp.raw, "_connection", None)
        budget = _Budget(seconds, getattr(connection, "sock", None))
        chunked = self._chunked_body()
        if chunked is not None:
            chunked.before_read = budget  # the chunked reader checks before each read itself
        self._before_read = budget
        return budget

    def close(self) -> None:
        """Close the connection; it is not reused."""
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
        if self.sock is not None:
            self.sock.settimeout(left)

    def spent(self) -> bool:
        """Whether the time is up (a socket timeout it set surfaces as urllib3's error)."""
        return time.monotonic() >= self.deadline

"""``Response``: what the transport hands the stream layer, and all it may do with it.

Status, headers, the body's bytes as they arrive, and ``close()``/``release()``. The stream
layer never sees a ``requests.Response``: a change of HTTP library touches this folder only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

import requests

from ..errors import ProviderError
from .abort import Abort
from .chunked import ChunkedBody, chunked_body

__all__ = ["Response"]

_READ_SIZE = 65536
_ERROR_BODY_CAP = 64 * 1024


class Response:
    """One HTTP response whose status and headers have arrived; the body is still unread."""

    __slots__ = ("_abort", "_chunked", "_resp", "headers", "status")

    def __init__(self, resp: requests.Response, abort: Abort) -> None:
        self._resp = resp
        self._abort = abort
        # The chunked-body reader, made on first read and kept for the drain: it lives and
        # dies with this response.
        self._chunked: Optional[ChunkedBody] = None
        self.status: int = resp.status_code
        #: Case-insensitive, as HTTP header names are.
        self.headers: Mapping[str, str] = resp.headers

    @property
    def content_type(self) -> str:
        """The media type alone, lower case (``""`` when there is none)."""
        return self.headers.get("Content-Type", "").split(";")[0].strip().lower()

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield body bytes as soon as the socket has any, chunked or close-delimited."""
        resp = self._resp
        raw = resp.raw
        chunked = self._chunked_body()
        if chunked is not None:
            while True:
                data = chunked.read()
                if not data:
                    return
                yield data
        # iter_content on a close-delimited body waits for a full buffer; read1 returns
        # whatever one recv gave. urllib3 >= 2 has read1; older versions expose
        # http.client's response as _fp.
        read1: Callable[[int], bytes] = getattr(raw, "read1", None) or raw._fp.read1  # type: ignore[union-attr]
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity") and hasattr(raw, "read1"):
            # blazen asks for identity, but a server (or a proxy) may compress the stream
            # anyway: urllib3 decodes gzip and deflate as they arrive.
            def read1(size: int, _read1: Any = raw.read1) -> bytes:
                data: bytes = _read1(size, decode_content=True)
                return data

        while True:
            data = read1(_READ_SIZE)
            if not data:
                return
            yield data

    def _chunked_body(self) -> Optional[ChunkedBody]:
        if self._chunked is None:
            self._chunked = chunked_body(self._resp)
        return self._chunked

    def read_body(self, cap: int, provider: str) -> str:
        """The whole (non-streamed) body as text, refusing one larger than ``cap``."""
        data = self._resp.raw.read(cap + 1, decode_content=True)
        if len(data) > cap:
            raise ProviderError(
                f"{provider} sent a response larger than {cap} bytes; it was not read "
                "(raise max_event_bytes if this is expected)",
                provider=provider,
                error_type="response_too_large",
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProviderError(
                f"{provider} sent a response that is not valid UTF-8", provider=provider
            ) from exc

    def read_error_body(self) -> str:
        """Up to 64 KiB of an error response's body, decoded leniently; closes the response."""
        resp = self._resp
        try:
            data = resp.raw.read(_ERROR_BODY_CAP, decode_content=True)
        except Exception:
            data = b""
        finally:
            resp.close()
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
        deadline = time.monotonic() + budget
        connection = getattr(raw, "_connection", None)
        sock = getattr(connection, "sock", None)

        def spend() -> None:
            # Before every socket read: the budget is for the whole drain, not per read.
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the drain budget is spent")
            if sock is not None:
                sock.settimeout(left)

        chunked = self._chunked_body()
        if chunked is not None:
            chunked.before_read = spend
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

    def close(self) -> None:
        """Close the connection; it is not reused."""
        self._resp.close()

    def location(self) -> Optional[str]:
        """Where a redirect points, if anywhere."""
        return self.headers.get("Location")

"""One HTTP call of a provider's batch API, through the model's own pool and policies.

A batch API is plain request/response JSON (and a JSONL download): no stream to fold. Each
call goes through the model's :class:`~blazen._http.Transport` (its proxy, TLS settings,
``max_connections`` slot), its ``connect_timeout`` and ``idle_timeout``, its retry policy
before giving up (``max_retries``, ``Retry-After`` up to ``retry_after_cap``), and its wire's
error reader, so a 429 here is the same :class:`~blazen.RateLimitError` a stream would get
and a key never shows in an error.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from ..._http import Abort, HttpRequest, map_exception, retry_delay
from ..._stream import ChatModel
from ...errors import BlazenError, ConnectionError, ProviderError, TimeoutError

__all__ = ["Caller", "maybe_done"]

logger = logging.getLogger("blazen")

#: The largest JSON answer read whole (a batch object, an inline Gemini result set).
MAX_JSON_BYTES = 256 * 1024 * 1024


def _whole_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def maybe_done(err: BlazenError) -> bool:
    """The request may have been carried out although ``err`` came instead of its answer.

    A connection that broke, or went quiet, after the request was sent: only a failure to
    connect at all (or an answer with a status) says for sure it was not.
    """
    if isinstance(err, TimeoutError):
        return err.limit != "connect"
    return isinstance(err, ConnectionError) and err.status is None


class Caller:
    """Makes a model's batch-API calls: JSON in, JSON out, errors typed, retries applied."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.provider = model.wire.provider
        #: Aborts the call in flight (Ctrl-C reaches it through the socket's own timeout).
        self.abort = Abort()

    def json(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: Optional[Any] = None,
        *,
        raw: Optional[bytes] = None,
        idempotent: bool = True,
    ) -> Any:
        """Send one request and decode its JSON answer, retrying what may be retried.

        A call that is not ``idempotent`` (creating a batch) is not retried after a broken
        connection or an idle timeout: the provider may have carried it out and only its
        answer was lost, and a retry would make a second batch. The caller decides.
        """
        data = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        request = HttpRequest(method=method, url=url, headers=dict(headers), body=data)
        return self._with_retries(request, self._json_once, idempotent=idempotent)

    def lines(self, url: str, headers: Mapping[str, str]) -> Iterator[bytes]:
        """The lines of a JSONL download, read as they arrive (the file is never held whole)."""
        request = HttpRequest(method="GET", url=url, headers=dict(headers), body=b"")
        # Only opening the download is retried: once lines have been handed out, a retry
        # would hand them out twice.
        resp = self._with_retries(request, self._open)
        finished = False
        try:
            tail = b""
            while data := resp.read():
                tail += data
                *whole, tail = tail.split(b"\n")
                for line in whole:
                    if line.strip():
                        yield line
            if tail.strip():
                if not _whole_json(tail):
                    # A body with no length ends where the connection closes: a last line
                    # cut short is a broken download, never a line to skip.
                    msg = (
                        f"the {self.provider} batch results download ended in the middle of "
                        "a line (the connection closed early); what arrived is kept, the rest "
                        "is read on the next try (run again with the same out=)"
                    )
                    raise ConnectionError(msg, provider=self.provider, retryable=True)
                yield tail
            finished = True
            resp.release()
        except BlazenError:
            raise
        except Exception as exc:
            raise self._mapped(exc, url) from exc
        finally:
            if not finished:
                resp.close()

    # -- one attempt -----------------------------------------------------------------------

    def _open(self, request: HttpRequest) -> Any:
        model = self.model
        opts = model.options
        try:
            resp = model.transport.open(
                request,
                self.abort,
                provider=self.provider,
                stream=False,
                connect_timeout=opts.connect_timeout,
                read_timeout=opts.idle_timeout,
            )
        except BlazenError:
            raise
        except Exception as exc:
            raise self._mapped(exc, request.url) from exc
        if resp.status != 200:
            try:
                text = resp.read_error_body()
            except Exception:
                text = ""
            raise model.wire.error(resp.status, resp.headers, text)
        return resp

    def _json_once(self, request: HttpRequest) -> Any:
        resp = self._open(request)
        finished = False
        try:
            opts = self.model.options
            text = resp.read_body(MAX_JSON_BYTES, within=opts.idle_timeout)
            finished = True
            resp.release()
        except BlazenError:
            raise
        except Exception as exc:
            raise self._mapped(exc, request.url) from exc
        finally:
            if not finished:
                resp.close()
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError as exc:
            msg = f"{self.provider}'s batch API answered with a body that is not JSON"
            raise ProviderError(
                msg, provider=self.provider, error_type="malformed_payload", body=text[:4096]
            ) from exc

    def _with_retries(self, request: HttpRequest, once: Any, *, idempotent: bool = True) -> Any:
        model = self.model
        opts = model.options
        attempt = 0
        while True:
            try:
                with model.transport.slot(self.abort):
                    return once(request)
            except BlazenError as err:
                if not idempotent and maybe_done(err):
                    raise
                delay = retry_delay(attempt, err, cap=opts.retry_after_cap)
                if delay is None or attempt >= opts.max_retries:
                    raise
                attempt += 1
                logger.info(
                    "%s batch API: %s; retrying in %.2f s (retry %d of %d)",
                    self.provider,
                    model.redact(err.message),
                    delay,
                    attempt,
                    opts.max_retries,
                )
                time.sleep(delay)

    def _mapped(self, exc: BaseException, url: str) -> BlazenError:
        opts = self.model.options
        return map_exception(
            exc,
            provider=self.provider,
            url=url,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.idle_timeout,
            proxy=self.model.transport.proxy,
        )

"""HTTP for blazen: the only package that imports requests or urllib3.

It sends a :class:`HttpRequest` over a model's pooled connections (:class:`Transport`),
hands back a small :class:`Response` (status, headers, the body read by read, close, and
:meth:`Response.check` for the statuses and media types a caller cannot read), cuts each
read into the batch of SSE events or NDJSON lines it completes (:func:`framer`), tears a
connection down from any thread (:class:`Abort`), decides when a failed request is worth
sending again (:func:`retry_delay`), and keeps the passwords a URL or proxy carries out of
sight (:func:`shown_url`, :func:`url_masks`).

It is sealed: every exception of the HTTP stack is mapped inside it to the blazen error
that says what happened (:func:`map_exception`), so only blazen errors leave it. The
private names of urllib3 and http.client it relies on are all in :mod:`.hooks`.
"""

from __future__ import annotations

from .abort import Abort
from .exceptions import map_exception, proxy_refused
from .framing import DEFAULT_MAX_EVENT_BYTES, Frame, Framer, framer
from .reader import busy, reading_body
from .request import HttpRequest
from .response import ErrorReader, ReadBudget, Response
from .retry import retry_delay
from .transport import Transport
from .urls import Proxy, shown_url, url_masks

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "Abort",
    "ErrorReader",
    "Frame",
    "Framer",
    "HttpRequest",
    "Proxy",
    "ReadBudget",
    "Response",
    "Transport",
    "busy",
    "framer",
    "map_exception",
    "proxy_refused",
    "reading_body",
    "retry_delay",
    "shown_url",
    "url_masks",
]

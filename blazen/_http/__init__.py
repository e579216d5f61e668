"""HTTP for blazen: the only package that imports requests or urllib3.

It sends a :class:`HttpRequest` over a model's pooled connections (:class:`Transport`),
hands back a small :class:`Response` (status, headers, bytes as they arrive, close), cuts
those bytes into SSE events or NDJSON lines, tears a connection down from any thread
(:class:`Abort`), maps every exception of the HTTP stack to a blazen error
(:func:`map_exception`), decides when a failed request is worth sending again
(:func:`retry_delay`), and keeps the passwords a URL or proxy carries out of sight
(:func:`shown_url`, :func:`url_masks`).
"""

from __future__ import annotations

from .abort import Abort
from .exceptions import map_exception, proxy_refused
from .framing import DEFAULT_MAX_EVENT_BYTES, iter_ndjson, iter_sse
from .request import HttpRequest
from .response import ReadBudget, Response
from .retry import retry_delay
from .transport import Transport
from .urls import Proxy, shown_url, url_masks

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "Abort",
    "HttpRequest",
    "Proxy",
    "ReadBudget",
    "Response",
    "Transport",
    "iter_ndjson",
    "iter_sse",
    "map_exception",
    "proxy_refused",
    "retry_delay",
    "shown_url",
    "url_masks",
]

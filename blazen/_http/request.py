"""The request the transport sends: built by a wire format, sent as it is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from .._types import by_value, immutable

__all__ = ["HttpRequest"]


@immutable
@by_value
@attrs.frozen(kw_only=True, repr=False, eq=False)
class HttpRequest:
    """A request ready to send: the transport adds nothing but the socket."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes

    def __repr__(self) -> str:
        # Headers carry the key: never show them.
        return f"HttpRequest({self.method} {self.url}, {len(self.body)} bytes)"

    @classmethod
    def post_json(
        cls, url: str, headers: Mapping[str, str], body: Any, *, sse: bool = False
    ) -> HttpRequest:
        """A JSON POST; ``sse`` asks for an event stream."""
        all_headers = dict(headers)
        if sse:
            all_headers["Accept"] = "text/event-stream"
        return cls(method="POST", url=url, headers=all_headers, body=json.dumps(body).encode())

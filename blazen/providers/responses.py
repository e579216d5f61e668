"""OpenAI's Responses API (``POST /v1/responses``) as a wire format: the request from
:mod:`.responses_input`, the stream read by :class:`~.responses_fold.ResponsesFold`. No I/O.

Stateless by default (``store: false``): the model's reasoning survives a turn as its
reasoning items, with their encrypted content, kept on ``resp.message`` and sent back
(https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from .._kit import HttpRequest, StreamState, error_from_body, error_from_http, parse_json
from .._types import CompletionRequest, CompletionResponse
from ..errors import ProviderError
from .responses_fold import ResponsesFold
from .responses_input import request_body

__all__ = ["ResponsesFold", "ResponsesWire"]


class ResponsesWire:
    """The Responses API wire format at ``{base_url}/responses``."""

    framing = "sse"
    stream_content_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        *,
        provider: str,
        url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
        auth_header: str = "Authorization",
        store: bool = False,
        encrypted_reasoning: Optional[bool] = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self._url = url
        self._store = store
        self._encrypted = encrypted_reasoning
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            self._headers[auth_header] = (
                f"Bearer {api_key}" if auth_header == "Authorization" else api_key
            )
        self._headers.update(headers)

    def _wants_encrypted(self, req: CompletionRequest) -> bool:
        if self._encrypted is not None:
            return self._encrypted
        # Stateless reasoning needs the encrypted items back, but models that do not reason
        # refuse the include with a 400 ("Encrypted content is not supported with this
        # model", pydantic-ai #2865): asked for when the request reasons, or the model does.
        name = (req.model or self.model).rsplit("/", 1)[-1]
        reasons = name.startswith(("o1", "o3", "o4", "gpt-5")) and "-chat" not in name
        return req.reasoning_effort is not None or reasons

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        return request_body(
            self.provider,
            req,
            model=self.model,
            stream=stream,
            store=self._store,
            encrypted_reasoning=self._wants_encrypted(req) and not self._store,
        )

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(req, stream=stream), sse=stream
        )

    def start(self, state: StreamState) -> ResponsesFold:
        """A fresh fold for one stream."""
        return ResponsesFold(self.provider, state)

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request."""
        obj = parse_json(self.provider, body)
        if obj.get("error") is not None and obj.get("object") != "response":
            raise error_from_body(self.provider, None, obj, raw=body)
        return self.start(StreamState()).whole(obj, body)

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)

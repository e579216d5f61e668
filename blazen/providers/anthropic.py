"""Anthropic's Messages API (``POST /v1/messages``). No I/O.

The stream is a sequence of named SSE events
(https://docs.anthropic.com/en/docs/build-with-claude/streaming):
``message_start`` (model, input usage), then per content block ``content_block_start`` /
``content_block_delta`` / ``content_block_stop``, then ``message_delta`` (stop reason and
*cumulative* usage) and ``message_stop``, the end signal. ``ping`` may come at any time,
and new event types may be added, so unknown events are ignored. An ``error`` event
carries the same body as an HTTP error and is classified the same way.

Quirks handled here:

- a ``tool_use`` block streams its input as ``input_json_delta`` fragments; a tool without
  arguments sends none (or one empty fragment), and its arguments are then ``{}``;
- ``thinking`` blocks stream ``thinking_delta`` (reasoning text) and one ``signature_delta``
  (an opaque token, not text: never shown as reasoning); ``redacted_thinking`` blocks come
  whole, encrypted. Both are kept as :class:`~blazen.ReasoningPart` values and sent back
  unchanged, first in the assistant turn, as a tool-use turn with thinking requires
  (https://docs.claude.com/en/docs/build-with-claude/extended-thinking);
- ``server_tool_use`` blocks (web search...) run on Anthropic's side: not the caller's
  tool calls, so they are not reported as such; a chunk carries a
  :class:`~blazen.ServerToolEvent` when one starts and when its result block arrives, and
  the turn's content is kept verbatim to go back next turn (:mod:`.anthropic_fold`);
- ``citations_delta`` adds a citation to the text block it belongs to (collected on
  ``CompletionResponse.citations`` when the block ends);
- ``pause_turn`` ends a turn the server paused (a long server-tool loop): the worker may
  continue it in the same stream (:meth:`AnthropicWire.continuation`).

The request body is built by :mod:`.anthropic_request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import attrs

from .._http import HttpRequest
from .._kit import StreamState, error_from_body, error_from_http, parse_json
from .._types import CompletionRequest, CompletionResponse
from ..errors import ProviderError
from .anthropic_fold import AnthropicFold
from .anthropic_request import MIN_THINKING_BUDGET, RequestBuilder

__all__ = ["MIN_THINKING_BUDGET", "AnthropicFold", "AnthropicWire"]

DEFAULT_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


class AnthropicWire:
    """The Messages API wire format at ``{base_url}/v1/messages``."""

    framing = "sse"
    stream_content_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        *,
        provider: str = "anthropic",
        base_url: str,
        api_key: str,
        model: str,
        headers: Mapping[str, str],
        version: str = DEFAULT_VERSION,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        structured_output: str = "format",
    ) -> None:
        self.provider = provider
        self.model = model
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._builder = RequestBuilder(provider, model, default_max_tokens, structured_output)
        self._headers: dict[str, str] = {
            "Content-Type": "application/json",
            "anthropic-version": version,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._headers.update(headers)

    # -- request -----------------------------------------------------------------------

    def messages(self, req: CompletionRequest) -> list[dict[str, Any]]:
        """The ``messages`` array (see :class:`.anthropic_request.RequestBuilder`)."""
        return self._builder.messages(req)

    def body(self, req: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``req``."""
        return self._builder.body(req, stream=stream)

    def build(self, req: CompletionRequest, *, stream: bool) -> HttpRequest:
        """The HTTP request for ``req``."""
        return HttpRequest.post_json(
            self._url, self._headers, self.body(req, stream=stream), sse=stream
        )

    def continuation(
        self, req: CompletionRequest, paused: CompletionResponse
    ) -> Optional[CompletionRequest]:
        """The request that continues ``paused`` (a ``pause_turn``), or None if it cannot be.

        https://platform.claude.com/docs/en/agents-and-tools/tool-use/server-tools: the
        same request with the paused assistant content appended, verbatim, as the last
        turn; the model goes on from there.
        """
        if paused.raw_finish_reason != "pause_turn" or not paused.provider_items:
            return None
        return attrs.evolve(req, messages=(*req.messages, paused.message))

    # -- stream ------------------------------------------------------------------------

    def start(self, state: StreamState) -> AnthropicFold:
        """A fold for one stream into ``state``."""
        return AnthropicFold(self.provider, state)

    # -- whole responses and errors ----------------------------------------------------

    def parse_response(self, body: str) -> CompletionResponse:
        """The response of a non-streaming request, folded block by block as a stream is."""
        obj = parse_json(self.provider, body)
        if obj.get("type") == "error" or obj.get("error") is not None:
            raise error_from_body(self.provider, None, obj, raw=body)
        state = StreamState()
        fold = AnthropicFold(self.provider, state)
        fold.whole(obj)
        return state.response()

    def error(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a non-success HTTP response."""
        return error_from_http(self.provider, status, headers, body)

"""What a provider sends beside text: citations, refusal details, server tools, verbatim items.

Each value keeps the provider's own object in ``raw`` (a JSON copy), so nothing a provider
says is lost even where blazen's typed fields have no word for it. Wire formats fill these
in; callers read them on :class:`~blazen.CompletionResponse` and send
:class:`ProviderItem` values back through ``CompletionResponse.message``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import attrs

from .._json import json_copy
from .frozen import by_value, immutable

__all__ = ["Citation", "ProviderItem", "ServerTool", "ServerToolEvent", "StopDetails"]


def _raw(value: Any) -> Any:
    # The provider's object as JSON: a copy nobody else holds, so the value stays what it was.
    return None if value is None else json_copy(value, "raw")


def _opt_str(_self: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        msg = f"{attribute.name} must be a string or None, got {type(value).__name__}"
        raise TypeError(msg)


def _opt_int(_self: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        msg = f"{attribute.name} must be an int or None, got {type(value).__name__}"
        raise TypeError(msg)


def _name(_self: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        msg = f"{attribute.name} must be a non-empty string, got {value!r:.60}"
        raise ValueError(msg) if isinstance(value, str) else TypeError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class Citation:
    """A source the answer cites, as one value for every provider.

    Fields a provider does not send are None; ``raw`` is its whole object. ``kind`` is the
    provider's own name for the citation:

    - Anthropic (``citations`` on a text block, streamed as ``citations_delta``):
      ``char_location`` / ``page_location`` / ``content_block_location`` (a document of the
      request: ``source_index`` is ``document_index``, ``title`` its ``document_title``,
      ``source_start``/``source_end`` the char, page or block range, end exclusive for chars
      and blocks, inclusive for pages as Anthropic numbers them), ``web_search_result_location``
      (``url``, ``title``), ``search_result_location`` (``source_index`` is
      ``search_result_index``, ``url`` its ``source``, the block range); ``cited_text`` is
      the quoted passage.
    - Gemini: ``grounding`` (a ``groundingSupports`` entry joined to its first
      ``groundingChunks`` source: ``url``/``title`` from ``web`` or ``retrievedContext``,
      ``source_index`` that chunk's index, ``cited_text`` the segment's text) and
      ``citation`` (a ``citationMetadata.citationSources`` entry: ``url``, ``title``, the
      answer span).
    - OpenAI Responses annotations: ``url_citation`` (``url``, ``title``), ``file_citation``
      / ``container_file_citation`` / ``file_path`` (``file_id``, ``filename``).

    ``text_start``/``text_end`` are the span of :attr:`CompletionResponse.content` the
    citation supports, in characters, end exclusive (Anthropic: the cited text block;
    Gemini: the segment, converted from its byte offsets; OpenAI: ``start_index`` /
    ``end_index``), or None where the provider gives no span.
    """

    provider: str = attrs.field(validator=_name)
    kind: str = attrs.field(validator=_name)
    cited_text: Optional[str] = attrs.field(default=None, validator=_opt_str)
    url: Optional[str] = attrs.field(default=None, validator=_opt_str)
    title: Optional[str] = attrs.field(default=None, validator=_opt_str)
    source_index: Optional[int] = attrs.field(default=None, validator=_opt_int)
    source_start: Optional[int] = attrs.field(default=None, validator=_opt_int)
    source_end: Optional[int] = attrs.field(default=None, validator=_opt_int)
    text_start: Optional[int] = attrs.field(default=None, validator=_opt_int)
    text_end: Optional[int] = attrs.field(default=None, validator=_opt_int)
    file_id: Optional[str] = attrs.field(default=None, validator=_opt_str)
    filename: Optional[str] = attrs.field(default=None, validator=_opt_str)
    raw: Any = attrs.field(default=None, converter=_raw, repr=False)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class StopDetails:
    """Why the provider stopped or refused an answer, beyond its finish reason.

    - Anthropic: the ``stop_details`` of a ``refusal`` stop (``category`` such as
      ``"cyber"``, ``explanation``), ``raw`` the whole object.
    - Gemini: a candidate stopped for safety (``SAFETY``, ``PROHIBITED_CONTENT``...):
      ``category`` the first blocked ``safetyRatings`` category (or the finish reason when
      none is marked blocked), ``explanation`` its ``finishMessage``, ``raw`` holding
      ``finishReason``, ``finishMessage`` and ``safetyRatings`` as sent.
    - OpenAI Responses: ``incomplete_details`` (``category`` its ``reason``).
    """

    provider: str = attrs.field(validator=_name)
    category: Optional[str] = attrs.field(default=None, validator=_opt_str)
    explanation: Optional[str] = attrs.field(default=None, validator=_opt_str)
    raw: Any = attrs.field(default=None, converter=_raw, repr=False)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ProviderItem:
    """Part of an assistant turn kept exactly as its provider sent it, to be sent back so.

    Some content has no blazen field and must still come back on the next turn (a server
    tool's call and its result, or the API refuses the turn; text with its citations). A
    wire format that meets such content keeps the turn's whole content here, in order;
    ``CompletionResponse.message`` carries it, and on the wire named by ``provider`` it is
    sent back *instead of* the turn rebuilt from text, tool calls and reasoning parts.
    Every other wire ignores it and sends those fields, as for any turn. ``kind`` says what
    ``data`` holds:

    - ``("anthropic", "content")``: the Messages API content blocks, a list;
    - ``("gemini", "parts")``: the model turn's ``parts``, a list;
    - ``("gemini", "continuation")``: ``{"continuationToken": ...}`` of an answer Gemini
      stopped with ``CONTINUATION``; sent as the last turn, it continues that answer;
    - ``("openai-responses", "output")``: the Responses API output items, a list.

    A turn whose content blazen's fields already carry whole has none.
    """

    provider: str = attrs.field(validator=_name)
    kind: str = attrs.field(validator=_name)
    data: Any = attrs.field(converter=_raw, repr=False)


# A provider's exact versioned type: web_search_20250305, code_execution_20250825...
_VERSIONED = r"^[a-z][a-z0-9_]*_\d{8}\Z"


# Config keys whose values are credentials (an MCP server's ``authorization`` or
# ``authorization_token``, its ``headers``): a repr names them, never shows them.
_SECRET_KEY = r"auth|token|secret|passw|key|cookie|credential|header"


def _masked(key: Any, value: Any) -> Any:
    if isinstance(key, str) and re.search(_SECRET_KEY, key, re.IGNORECASE):
        return {k: "***" for k in value} if isinstance(value, dict) else "***"
    if isinstance(value, dict):
        return {k: _masked(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(None, v) for v in value]
    return value


def _shown_config(config: dict[str, Any]) -> str:
    return repr(_masked(None, config))


def _tool_config(value: Any) -> dict[str, Any]:
    copied = json_copy(value, "server tool config")
    if not isinstance(copied, dict):
        msg = "server tool config must be keyword arguments (a JSON object)"
        raise TypeError(msg)
    return copied


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ServerTool:
    """A tool the provider runs itself (web search, code execution...): ``Llm.server_tool``.

    ``name`` is a short name (``"web_search"``, ``"web_fetch"``, ``"code_execution"``,
    ``"google_search"``...), which each wire format sends as the newest version it
    documents, or a provider's exact versioned type (``"web_search_20250305"``), sent as
    given. ``config`` holds the tool's own options (``max_uses=5``, ``allowed_domains=[...]``),
    sent beside the type as given. A wire format without server tools, or without this one,
    raises :class:`~blazen.UnsupportedError` before sending.
    """

    name: str = attrs.field(validator=_name)
    config: dict[str, Any] = attrs.field(factory=dict, converter=_tool_config, repr=_shown_config)

    @property
    def versioned(self) -> bool:
        """Whether :attr:`name` is an exact versioned type (``web_search_20250305``)."""
        return bool(re.match(_VERSIONED, self.name))


_STATUSES = ("running", "done")


def _status(_self: Any, _attribute: Any, value: Any) -> None:
    if value not in _STATUSES:
        msg = f"server tool status must be one of {', '.join(_STATUSES)}; got {value!r}"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ServerToolEvent:
    """On a chunk: a provider-side tool started (``"running"``) or gave its result (``"done"``).

    For a UI that shows a search or a code run in progress; the call is the provider's,
    never one of ``StreamChunk.tool_calls``. ``name`` is the provider's name for the tool
    (``web_search``, ``code_execution``, Gemini's ``executableCode``...), ``id`` its call
    id where it gives one, ``raw`` the block or part that announced it.
    """

    provider: str = attrs.field(validator=_name)
    name: str = attrs.field(validator=_name)
    status: str = attrs.field(validator=_status)
    id: Optional[str] = attrs.field(default=None, validator=_opt_str)
    raw: Any = attrs.field(default=None, converter=_raw, repr=False)

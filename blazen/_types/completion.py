"""A completion: the request, its usage, the chunks it streams and the assembled response."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

import attrs

from .._schema.output import OutputSpec, output_spec
from .calls import ToolCall, ToolDefinition
from .frozen import builder_class, by_value, immutable
from .messages import ChatMessage, ReasoningPart
from .provider import Citation, ProviderItem, ServerTool, ServerToolEvent, StopDetails
from .request_checks import FIELD_CHECKS, REQUEST_CHECKS

if TYPE_CHECKING:
    from decimal import Decimal  # loaded with the first price asked for (blazen._pricing)

_new = object.__new__
#: Stores a converted field in __attrs_post_init__ (the class refuses assignment).
_set_field = object.__setattr__


def _output(value: Any) -> Optional[OutputSpec]:
    if value is None or isinstance(value, OutputSpec):
        return value
    return output_spec(value)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class CompletionRequest:
    """Everything one completion needs except the model. Immutable and reusable."""

    messages: tuple[ChatMessage, ...]
    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    stop: tuple[str, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    #: Tools the provider runs itself (``Llm.server_tool``), passed in ``tools=`` beside
    #: function tools.
    server_tools: tuple[ServerTool, ...] = ()
    tool_choice: Optional[str] = None
    response_format: Optional[dict[str, Any]] = None
    model: Optional[str] = None
    system: Optional[str] = None
    #: How hard a reasoning model thinks: ``"low"``, ``"medium"``, ``"high"``, and where a
    #: provider documents them ``"none"``, ``"minimal"``, ``"xhigh"``, ``"max"``.
    reasoning_effort: Optional[str] = None
    #: Tokens a reasoning model may spend thinking (Anthropic, Gemini), or ``"adaptive"``:
    #: the model decides (Anthropic adaptive thinking, Gemini's dynamic budget).
    reasoning_budget: Optional[Union[int, str]] = None
    #: ``"omitted"``: ask for the thinking without its text (Anthropic ``display``; the
    #: signature still comes, and goes back); None for the provider's default.
    reasoning_display: Optional[str] = None
    #: At most this many continuations of a paused turn (Anthropic ``pause_turn``) within
    #: this stream; lowers the model's ``max_continuations``, 0 turns continuing off.
    max_continuations: Optional[int] = None
    #: The typed answer asked for with ``output=`` (see ``Llm.completion_request``); a
    #: class given here directly becomes its :class:`OutputSpec`.
    output: Optional[OutputSpec] = attrs.field(default=None, converter=_output)
    #: The answer this one continues, by its ``CompletionResponse.id``, on a server that
    #: kept it (the Responses API with ``store=True``); other wires refuse it.
    previous_response_id: Optional[str] = None

    def __attrs_post_init__(self) -> None:
        # Built directly (as the Swift and Kotlin seeds build theirs) or by evolve: the same
        # immutable values and the same refusals as Llm.completion_request, up front.
        fields: dict[str, Any] = {}
        for name, check in FIELD_CHECKS.items():
            fields[name] = value = check(getattr(self, name))
            _set_field(self, name, value)
        for whole in REQUEST_CHECKS:
            whole(fields)


def _count(value: Any) -> int:
    # A whole float (5.0, as some servers send) is accepted as the int it is.
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    if type(value) is not int or value < 0:
        msg = f"a token count must be a whole number of at least 0, got {value!r}"
        raise TypeError(msg)
    return value


def _name(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        msg = f"a provider or model name must be a string or None, got {type(value).__name__}"
        raise TypeError(msg)
    return value


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class TokenUsage:
    """Token counts as the provider reported them (0 where it reported none).

    Each is a whole number of at least 0; a count that is not (``"5"``, ``-1``, ``NaN``)
    raises ``TypeError``, which makes a stream that carries one a malformed payload.
    ``prompt_tokens`` counts every input token, ``cached_tokens`` (read from the
    provider's prompt cache) and ``cache_write_tokens`` (written to it) included.

    On an error or a cancel (``err.usage``) the counts are what the provider had reported
    so far, with ``partial`` True; where it had reported nothing, they are estimated from
    the text sent and received (``estimated`` True, and ``partial`` too). ``done``'s usage
    is the provider's own (both False). ``cost`` prices the counts (see :attr:`cost`).
    """

    prompt_tokens: int = attrs.field(default=0, converter=_count)
    completion_tokens: int = attrs.field(default=0, converter=_count)
    total_tokens: int = attrs.field(default=0, converter=_count)
    cached_tokens: int = attrs.field(default=0, converter=_count)
    cache_write_tokens: int = attrs.field(default=0, converter=_count)
    reasoning_tokens: int = attrs.field(default=0, converter=_count)
    #: The stream ended before the provider's final figures: these are the last it sent.
    partial: bool = False
    #: The provider sent no figures: these are estimated from the text (about 4
    #: characters a token), never billed numbers.
    estimated: bool = False
    #: The provider and model these counts are priced as (blazen sets them where the answer
    #: is assembled: the provider's name, the model the server said answered). Not compared.
    provider: Optional[str] = attrs.field(default=None, converter=_name, eq=False, repr=False)
    model: Optional[str] = attrs.field(default=None, converter=_name, eq=False, repr=False)
    #: Billed at the provider's batch rates (an answer of ``batch.run(via="provider")``,
    #: about half the price). Not compared.
    batch: bool = attrs.field(default=False, eq=False, repr=False)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        """The counts of two completions added, each by each (an agent run's total).

        The sum is priced as the model both were priced as, if it is one.
        """
        if not isinstance(other, TokenUsage):
            return NotImplemented
        same = (self.provider, self.model, self.batch) == (
            other.provider,
            other.model,
            other.batch,
        )
        return TokenUsage(
            **{a.name: getattr(self, a.name) + getattr(other, a.name) for a in _COUNTS},
            partial=self.partial or other.partial,
            estimated=self.estimated or other.estimated,
            provider=self.provider if same else None,
            model=self.model if same else None,
            batch=self.batch and other.batch,
        )

    def __repr__(self) -> str:
        # The flags only when set: a provider's own figures read as they always have.
        shown = [f"{a.name}={getattr(self, a.name)!r}" for a in _COUNTS]
        shown += [f"{flag}=True" for flag in ("partial", "estimated") if getattr(self, flag)]
        return f"TokenUsage({', '.join(shown)})"

    def priced_as(
        self, provider: Optional[str], model: Optional[str], *, batch: bool = False
    ) -> TokenUsage:
        """These counts, priced as ``model`` of ``provider`` (at its batch rates if ``batch``)."""
        return attrs.evolve(self, provider=provider, model=model, batch=batch)

    @property
    def cost(self) -> Optional[Decimal]:
        """What these tokens cost in US dollars, or None when it is not known.

        Priced by :attr:`provider` and :attr:`model` (the names, not the URL: a model reached
        through a proxy or a test server is priced as itself) from the ``genai-prices``
        table (``pip install 'blazen-stream[prices]'``), with cached, cache-write and reasoning
        tokens at the provider's own rates (its batch rates for :attr:`batch` counts, which
        need genai-prices 0.2 or later). None without the package, for a model or
        provider it does not know (a local server), or for counts it cannot price: never
        a guess. Computed when read, so a stream that never asks pays nothing.
        """
        from .._pricing import price

        return price(
            self.provider,
            self.model,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
            batch=self.batch,
        )

    @property
    def input_tokens(self) -> int:
        """Alias of :attr:`prompt_tokens`."""
        return self.prompt_tokens

    @property
    def output_tokens(self) -> int:
        """Alias of :attr:`completion_tokens`."""
        return self.completion_tokens

    @property
    def cached_input_tokens(self) -> int:
        """Alias of :attr:`cached_tokens` (its earlier name)."""
        return self.cached_tokens


#: The counts (summed by ``+``), as opposed to the flags and names.
_COUNTS = tuple(a for a in attrs.fields(TokenUsage) if a.name.endswith("_tokens"))
# Each slot's setter, for priced_usage: a copy made without __init__'s converters.
_USAGE_SLOTS = tuple(
    (TokenUsage.__dict__[a.name].__get__, TokenUsage.__dict__[a.name].__set__)
    for a in attrs.fields(TokenUsage)
    if a.name not in ("provider", "model")
)
_set_usage_provider = TokenUsage.__dict__["provider"].__set__
_set_usage_model = TokenUsage.__dict__["model"].__set__


def priced_usage(usage: TokenUsage, provider: Optional[str], model: Optional[str]) -> TokenUsage:
    """``usage.priced_as(provider, model)`` for the hot path: once per stream.

    A copy made slot by slot (its values were checked when ``usage`` was built), a
    twentieth of ``attrs.evolve``'s cost. A test checks it equals ``priced_as``.
    """
    copy = _new(TokenUsage)
    for get, set_ in _USAGE_SLOTS:
        set_(copy, get(usage))
    _set_usage_provider(copy, provider)
    _set_usage_model(copy, model)
    return copy


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class StreamChunk:
    """One step of a stream.

    ``tool_calls`` is the cumulative snapshot of every tool call so far: replace your state
    with it, never append. ``is_final`` is True only on the last chunk of a successful stream:
    that chunk comes right before done, carries no new text and repeats the final snapshot.
    ``refusal_delta`` is text of the model declining to answer (OpenAI's ``refusal``, the
    reason of Anthropic's ``refusal`` stop), or None; a refused answer ends ``content_filter``.
    """

    content_delta: Optional[str] = None
    reasoning_delta: Optional[str] = None
    tool_calls: Sequence[ToolCall] = ()
    is_final: bool = False
    refusal_delta: Optional[str] = None
    #: A provider-side tool started or finished (web search...), for a UI to show; never
    #: one of ``tool_calls``.
    server_tool: Optional[ServerToolEvent] = None


_ChunkBuild = builder_class(StreamChunk)


def stream_chunk(
    content_delta: Optional[str],
    reasoning_delta: Optional[str],
    tool_calls: Sequence[ToolCall],
    refusal_delta: Optional[str] = None,
) -> StreamChunk:
    """``StreamChunk(...)`` for the hot path: one per streamed event.

    Fills the slots of a :func:`~.frozen.builder_class` instance and makes it a StreamChunk,
    which costs a quarter of the keyword ``__init__`` (StreamChunk has nothing to
    validate). A test checks it builds the same value as the constructor, so a field added
    to StreamChunk cannot be missed here.
    """
    chunk = _new(_ChunkBuild)
    chunk.content_delta = content_delta
    chunk.reasoning_delta = reasoning_delta
    chunk.tool_calls = tool_calls
    chunk.is_final = False
    chunk.refusal_delta = refusal_delta
    chunk.server_tool = None
    chunk.__class__ = StreamChunk
    return chunk  # type: ignore[no-any-return]


def server_tool_chunk(event: ServerToolEvent, tool_calls: Sequence[ToolCall]) -> StreamChunk:
    """The chunk that tells a provider-side tool started or finished."""
    return StreamChunk(tool_calls=tool_calls, server_tool=event)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class CompletionResponse:
    """The assembled result of a completion, streamed or not.

    ``refusal`` is the model's explanation when it declined to answer (every
    ``refusal_delta`` joined), else None; a refused answer's ``finish_reason`` is
    ``content_filter`` whatever the provider said (its word stays in ``raw_finish_reason``).
    ``output`` is the validated typed answer when the request had ``output=``, else None.
    """

    content: str
    reasoning: Optional[str] = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = ""
    raw_finish_reason: Optional[str] = None
    usage: Optional[TokenUsage] = None
    model: Optional[str] = None
    refusal: Optional[str] = None
    #: The reasoning as the provider sent it, signatures included (see :class:`ReasoningPart`).
    reasoning_parts: tuple[ReasoningPart, ...] = ()
    output: Any = None
    #: The provider's id of this answer (OpenAI ``chatcmpl-...``, Anthropic ``msg_...``,
    #: Gemini ``responseId``), or None where it gives none (Ollama).
    id: Optional[str] = None
    #: The sources the answer cites, in the order they came (see :class:`Citation`).
    citations: tuple[Citation, ...] = ()
    #: Why the provider stopped or refused, beyond the finish reason (see
    #: :class:`StopDetails`), or None.
    stop_details: Optional[StopDetails] = None
    #: The turn's content as the provider sent it, where blazen's fields cannot carry it
    #: (server tool blocks, cited text): sent back by :attr:`message` (see
    #: :class:`ProviderItem`).
    provider_items: tuple[ProviderItem, ...] = ()
    #: The provider that answered ("openai", "anthropic"...): with a fallback, the member
    #: that did. Set by blazen where the response is assembled; not compared.
    provider: Optional[str] = attrs.field(default=None, eq=False)

    @property
    def message(self) -> ChatMessage:
        """This answer as the assistant turn to append to the conversation.

        It carries the text, the tool calls and the provider's reasoning with its
        signatures, which reasoning models (Claude with thinking, Gemini 2.5 and 3,
        DeepSeek) require back on the next turn::

            resp = model.complete(req)
            messages = [*req.messages, resp.message, Llm.user("And then?")]
        """
        # A refused answer's turn holds the refusal: the conversation reads as it went.
        text = self.content or self.refusal or ""
        return ChatMessage(
            role="assistant",
            content=text if text or not self.tool_calls else None,
            tool_calls=self.tool_calls,
            reasoning_parts=self.reasoning_parts,
            provider_items=self.provider_items,
        )



_set_response_usage = CompletionResponse.__dict__["usage"].__set__
_set_response_provider = CompletionResponse.__dict__["provider"].__set__


def name_response(
    response: CompletionResponse, usage: Optional[TokenUsage], provider: str
) -> CompletionResponse:
    """``response`` with ``usage`` and ``provider`` set, in place, for the hot path.

    Only for a response nobody else holds yet (the one the worker has just assembled):
    filling two slots costs nothing, where ``attrs.evolve`` copies every field.
    """
    _set_response_usage(response, usage)
    _set_response_provider(response, provider)
    return response

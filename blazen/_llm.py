"""``blazen.Llm``: builders that validate values before anything is sent."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

import attrs

from ._attachments import Source, load_audio, load_document, load_video
from ._json import json_copy
from ._schema.output import OutputSpec, output_spec
from ._types import (
    Attachment,
    AudioPart,
    ChatMessage,
    CompletionRequest,
    DocumentPart,
    ImagePart,
    ReasoningPart,
    ServerTool,
    ToolCall,
    ToolDefinition,
    VideoPart,
)
from ._types.request_checks import DISPLAYS, EFFORTS, TOOL_CHOICES, check_count, check_number

__all__ = ["Llm"]

# One list of each, shared with CompletionRequest's own checks (blazen._types.request_checks).
_TOOL_CHOICES = TOOL_CHOICES
_EFFORTS = EFFORTS
_DISPLAYS = DISPLAYS


def _check_number(name: str, value: Optional[float], low: float, high: float) -> Optional[float]:
    return check_number(name, value, low, high)


def _image(item: Union[str, ImagePart]) -> ImagePart:
    if isinstance(item, ImagePart):
        return item
    if isinstance(item, str):
        if item.startswith(("http://", "https://", "data:")):
            return ImagePart(url=item)
        msg = (
            f"an image string must be an http(s) or data: URL, got {item[:40]!r}; "
            "for base64 bytes use Llm.image(data=..., media_type=...)"
        )
        raise ValueError(msg)
    msg = f"images must be URLs or Llm.image(...) values, got {type(item).__name__}"
    raise TypeError(msg)


class Llm:
    """Builders for messages, tools and requests.

    Example::

        req = Llm.completion_request(
            messages=[Llm.system("You are terse."), Llm.user("Tell me a joke.")],
            max_tokens=256,
        )
    """

    @staticmethod
    def system(text: str, *, cache: bool = False, name: Optional[str] = None) -> ChatMessage:
        """A system message; ``cache=True`` puts a prompt-cache breakpoint after it.

        The breakpoint is Anthropic's ``cache_control`` (at most four per request, a fifth
        raises ``ValidationError``); OpenAI and Gemini cache long prefixes by themselves and
        ignore the flag. ``TokenUsage.cached_tokens`` says what was read from the cache.
        ``name`` (optional) is sent where the wire has one (OpenAI).
        """
        return ChatMessage(role="system", content=text, cache=cache, name=name)

    @staticmethod
    def user(
        text: str,
        images: Iterable[Union[str, ImagePart]] = (),
        *,
        attachments: Iterable[Attachment] = (),
        cache: bool = False,
        name: Optional[str] = None,
    ) -> ChatMessage:
        """A user message: text, optionally with images given by URL or :meth:`image`.

        ``attachments`` holds documents, audio and video (:meth:`document`, :meth:`audio`,
        :meth:`video`); a
        provider that cannot take one raises :class:`~blazen.UnsupportedError` before
        sending. ``cache=True`` puts a prompt-cache breakpoint on its last part (see
        :meth:`system`); ``name`` (optional) tells users apart, sent where the wire has one
        (OpenAI).
        """
        if isinstance(images, (str, ImagePart)):
            images = [images]
        if isinstance(attachments, (DocumentPart, AudioPart, VideoPart)):
            attachments = [attachments]
        if isinstance(attachments, (str, bytes)) or not isinstance(attachments, Iterable):
            msg = (
                "attachments must be a list of Llm.document(...), Llm.audio(...) and "
                "Llm.video(...) values"
            )
            raise TypeError(msg)
        return ChatMessage(
            role="user",
            content=text,
            images=tuple(_image(i) for i in images),
            attachments=tuple(attachments),
            cache=cache,
            name=name,
        )

    @staticmethod
    def document(
        data_or_path_or_url: Source,
        media_type: str = "application/pdf",
        filename: Optional[str] = None,
        *,
        citations: bool = False,
    ) -> DocumentPart:
        """A document for :meth:`user`'s ``attachments``: bytes, a file's path, or a URL.

        Bytes and files are base64-encoded now (a file is read now: a missing, empty or
        unreadable one raises :class:`~blazen.ValidationError` here, not when sending); an
        http(s) URL is sent as a URL where the provider fetches documents (Anthropic,
        Gemini). ``filename`` (by default the file's name) goes where the wire has one.
        ``citations=True`` asks Claude to cite the document (``response.citations``).

        Example::

            Llm.user("Summarise this.", attachments=[Llm.document("report.pdf")])
        """
        doc = load_document(data_or_path_or_url, media_type, filename)
        if citations:
            doc = attrs.evolve(doc, citations=True)
        return doc

    @staticmethod
    def audio(data_or_path: Source, format: str = "wav") -> AudioPart:
        """A sound clip for :meth:`user`'s ``attachments``: bytes or a file's path.

        ``format`` is ``"wav"`` or ``"mp3"``. The clip is read and base64-encoded now; it
        reaches OpenAI as ``input_audio`` and Gemini as inline data.
        """
        return load_audio(data_or_path, format)

    @staticmethod
    def video(data_or_path_or_url: Source, media_type: str = "video/mp4") -> VideoPart:
        """A video for :meth:`user`'s ``attachments``: bytes, a file's path, or a URL.

        Bytes and files are base64-encoded now (a missing, empty or unreadable file raises
        :class:`~blazen.ValidationError` here); an http(s) URL (a Gemini Files API URI, a
        public YouTube link) is sent for the provider to fetch. Gemini takes video (as
        ``inlineData`` or ``fileData``); the other wires raise
        :class:`~blazen.UnsupportedError` before sending.

        Example::

            Llm.user("What happens at 0:42?", attachments=[Llm.video("clip.mp4")])
        """
        return load_video(data_or_path_or_url, media_type)

    @staticmethod
    def image(
        *, url: Optional[str] = None, data: Optional[str] = None, media_type: str = "image/png"
    ) -> ImagePart:
        """An image for :meth:`user`: by ``url``, or by base64 ``data`` and its ``media_type``."""
        return ImagePart(url=url, data=data, media_type=media_type)

    @staticmethod
    def assistant(
        text: Optional[str] = None,
        tool_calls: Iterable[ToolCall] = (),
        *,
        name: Optional[str] = None,
        reasoning_parts: Iterable[ReasoningPart] = (),
    ) -> ChatMessage:
        """An earlier assistant turn: its text and/or the tool calls it made (and ``name``).

        ``reasoning_parts`` are the provider's reasoning with its signatures, sent back as
        they came; ``CompletionResponse.message`` builds the whole turn for you.
        """
        calls = tuple(tool_calls)
        for call in calls:
            if not isinstance(call, ToolCall):
                msg = f"tool_calls must hold ToolCall values, got {type(call).__name__}"
                raise TypeError(msg)
        if text is None and not calls:
            msg = "an assistant message needs text, tool calls, or both"
            raise ValueError(msg)
        return ChatMessage(
            role="assistant",
            content=text,
            tool_calls=calls,
            name=name,
            reasoning_parts=tuple(reasoning_parts),
        )

    @staticmethod
    def tool_result(tool_call_id: str, content: Any, *, is_error: bool = False) -> ChatMessage:
        """The result of a tool call; non-string content is sent as JSON.

        ``is_error=True`` says the tool failed and ``content`` explains why: Anthropic
        receives ``is_error: true``, Gemini an ``error`` response, OpenAI-format servers and
        Ollama the text.
        """
        if not isinstance(tool_call_id, str) or not tool_call_id:
            msg = f"tool_call_id must be the id of the call being answered, got {tool_call_id!r}"
            raise ValueError(msg)
        if not isinstance(content, str):
            try:
                content = json.dumps(content)
            except (TypeError, ValueError) as exc:
                msg = f"tool result must be a string or JSON-serialisable: {exc}"
                raise TypeError(msg) from exc
        return ChatMessage(
            role="tool", content=content, tool_call_id=tool_call_id, is_error=is_error
        )

    @staticmethod
    def tool(
        name: str, description: str = "", parameters: Optional[dict[str, Any]] = None
    ) -> ToolDefinition:
        """A tool the model may call, with a JSON-schema ``parameters`` object."""
        if parameters is None:
            return ToolDefinition(name=name, description=description)
        return ToolDefinition(name=name, description=description, parameters=parameters)

    @staticmethod
    def server_tool(name: str, **config: Any) -> ServerTool:
        """A tool the provider runs itself, for ``tools=`` beside function tools.

        ``name`` is a short name, sent as the newest version the provider documents:
        ``"web_search"``, ``"web_fetch"``, ``"code_execution"``, ``"tool_search_regex"``,
        ``"tool_search_bm25"`` (Anthropic), ``"google_search"``, ``"code_execution"``,
        ``"url_context"``, ``"google_maps"``, ``"file_search"`` (Gemini), or an exact
        versioned type (``"web_search_20250305"``), sent as given. ``config`` holds the
        tool's own options, sent as given. Its calls and results are never the caller's
        tool calls: they are kept on ``resp.message`` and go back with the next turn, and
        chunks carry a :class:`~blazen.ServerToolEvent` while one runs. Example::

            req = Llm.completion_request(
                [Llm.user("What happened in Lisbon today?")],
                tools=[Llm.server_tool("web_search", max_uses=3)],
            )
        """
        return ServerTool(name=name, config=config)

    @staticmethod
    def completion_request(
        messages: Sequence[ChatMessage],
        *,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        stop: Union[str, Sequence[str], None] = None,
        tools: Sequence[Union[ToolDefinition, ServerTool]] = (),
        tool_choice: Optional[str] = None,
        response_format: Optional[dict[str, Any]] = None,
        model: Optional[str] = None,
        system: Optional[str] = None,
        reasoning_effort: Optional[str] = None,
        reasoning_budget: Union[int, str, None] = None,
        output: Optional[type] = None,
        reasoning_display: Optional[str] = None,
        max_continuations: Optional[int] = None,
        previous_response_id: Optional[str] = None,
    ) -> CompletionRequest:
        """A request, validated now so that a bad value never reaches the network.

        Example::

            req = Llm.completion_request(
                [Llm.system("You are terse."), Llm.user("Tell me a joke.")], max_tokens=256
            )

        ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or the name of one of
        ``tools`` (forces that function). ``model`` overrides the model's default id;
        ``system`` is a system prompt placed before ``messages``.

        ``tools`` may hold :meth:`server_tool` values beside function tools.

        Reasoning: ``reasoning_effort`` (``"low"``, ``"medium"``, ``"high"``; ``"none"``,
        ``"minimal"``, ``"xhigh"`` and ``"max"`` where a provider documents them) goes to
        OpenAI-format servers as ``reasoning_effort``, to Anthropic as
        ``output_config.effort``, to Gemini as ``thinkingLevel`` and to Ollama as ``think``;
        ``reasoning_budget`` (thinking tokens) goes to Anthropic as
        ``thinking.budget_tokens`` and to Gemini as ``thinkingBudget``, and
        ``reasoning_budget="adaptive"`` lets the model decide (Anthropic adaptive thinking,
        Gemini ``thinkingBudget: -1``). ``reasoning_display="omitted"`` asks for thinking
        without its text (Anthropic; the signature still goes back). A provider that
        cannot take the one given raises :class:`~blazen.UnsupportedError` before sending;
        what a given model refuses comes back as the API's own error.

        ``max_continuations`` lowers the model's cap on continuing a paused turn (0: report
        it as ``"paused"`` at once).

        Typed output: ``output=Weather`` (an attrs class, a dataclass or a ``TypedDict``)
        asks for an answer of that type, sent as a strict JSON schema (OpenAI-format
        ``response_format``, Gemini ``responseJsonSchema``, Ollama ``format``, a forced tool
        on Anthropic); ``response.output`` is then a validated ``Weather``, and an answer
        that is not one raises :class:`~blazen.OutputValidationError` (a refusal,
        :class:`~blazen.RefusalError`). It cannot be combined with ``response_format`` or
        with a ``tool_choice`` that forces a tool.

        ``previous_response_id`` (a ``CompletionResponse.id``) continues an answer the
        server kept: only the Responses API with ``store=True`` has one to continue
        (``Providers.openai(api="responses", store=True)``); ``messages`` then hold only
        what is new. Other wires refuse it before sending.
        """
        if isinstance(messages, (str, ChatMessage)) or not isinstance(messages, Sequence):
            msg = "messages must be a list of Llm.system/user/assistant/tool_result messages"
            raise TypeError(msg)
        msgs = tuple(messages)
        for m in msgs:
            if not isinstance(m, ChatMessage):
                msg = f"messages must be ChatMessage values (Llm.user(...)), not {type(m).__name__}"
                raise TypeError(msg)
        if not msgs and not system:
            msg = "a completion request needs at least one message"
            raise ValueError(msg)
        _check_count("max_tokens", max_tokens)
        stops: tuple[str, ...]
        if stop is None:
            stops = ()
        elif isinstance(stop, str):
            stops = (stop,)
        else:
            stops = tuple(stop)
        if not all(isinstance(s, str) and s for s in stops):
            msg = f"stop must be a non-empty string or a list of them, got {stop!r}"
            raise ValueError(msg)
        if isinstance(tools, (ToolDefinition, ServerTool)):
            tools = [tools]
        tool_defs: tuple[ToolDefinition, ...] = ()
        server_tools: tuple[ServerTool, ...] = ()
        for t in tools:
            if isinstance(t, ServerTool):
                server_tools += (t,)
            elif isinstance(t, ToolDefinition):
                tool_defs += (t,)
            else:
                msg = (
                    "tools must be Llm.tool(...) or Llm.server_tool(...) values, got "
                    f"{type(t).__name__}"
                )
                raise TypeError(msg)
        if tool_choice is not None:
            names = {t.name for t in tool_defs}
            if tool_choice not in _TOOL_CHOICES and tool_choice not in names:
                msg = (
                    f"tool_choice must be one of {', '.join(_TOOL_CHOICES)} or the name of a "
                    f"tool in tools; got {tool_choice!r}"
                )
                raise ValueError(msg)
        if response_format is not None:
            if not isinstance(response_format, dict):
                msg = "response_format must be a dict such as {'type': 'json_object'}"
                raise TypeError(msg)
            response_format = json_copy(response_format, "response_format")
        for name, value in (
            ("model", model),
            ("system", system),
            ("previous_response_id", previous_response_id),
        ):
            if value is not None and not isinstance(value, str):
                msg = f"{name} must be a string, got {type(value).__name__}"
                raise TypeError(msg)
        if reasoning_effort is not None and reasoning_effort not in _EFFORTS:
            msg = f"reasoning_effort must be one of {', '.join(_EFFORTS)}; got {reasoning_effort!r}"
            raise ValueError(msg)
        if reasoning_budget != "adaptive":
            _check_count("reasoning_budget", reasoning_budget)
        if reasoning_display is not None and reasoning_display not in _DISPLAYS:
            msg = (
                f"reasoning_display must be one of {', '.join(_DISPLAYS)}; "
                f"got {reasoning_display!r}"
            )
            raise ValueError(msg)
        if max_continuations is not None:
            if isinstance(max_continuations, bool) or not isinstance(max_continuations, int):
                msg = f"max_continuations must be an int, got {type(max_continuations).__name__}"
                raise TypeError(msg)
            if max_continuations < 0:
                msg = f"max_continuations must be at least 0, got {max_continuations}"
                raise ValueError(msg)
        spec = None if output is None else _output(output, response_format, tool_defs, tool_choice)
        return CompletionRequest(
            messages=msgs,
            max_tokens=max_tokens,
            temperature=_check_number("temperature", temperature, 0.0, 2.0),
            top_p=_check_number("top_p", top_p, 0.0, 1.0),
            stop=stops,
            tools=tool_defs,
            server_tools=server_tools,
            tool_choice=tool_choice,
            response_format=response_format,
            model=model,
            system=system,
            reasoning_effort=reasoning_effort,
            reasoning_budget=reasoning_budget,
            reasoning_display=reasoning_display,
            max_continuations=max_continuations,
            output=spec,
            previous_response_id=previous_response_id,
        )


def _output(
    cls: Any,
    response_format: Optional[dict[str, Any]],
    tools: tuple[ToolDefinition, ...],
    tool_choice: Optional[str],
) -> OutputSpec:
    """The spec for ``output=cls``; ``ValueError`` where the request also asks otherwise."""
    spec = output_spec(cls)
    if response_format is not None:
        msg = (
            "output= and response_format= both say how the answer is shaped; pass one "
            "(output= builds the JSON-schema response_format itself)"
        )
        raise ValueError(msg)
    if tool_choice not in (None, "auto", "none"):
        msg = (
            f"output= asks for a {spec.name} answer, but tool_choice={tool_choice!r} forces "
            "a tool call instead; use tool_choice='auto' or leave it unset"
        )
        raise ValueError(msg)
    if any(t.name == spec.name for t in tools):
        msg = (
            f"a tool is named {spec.name!r}, the name the typed output goes by (Anthropic "
            "receives it as a forced tool); rename the tool or the class"
        )
        raise ValueError(msg)
    return spec


def _check_count(name: str, value: Any) -> None:
    """``TypeError`` unless ``value`` is None or an int (not a bool); ``ValueError`` below 1."""
    check_count(name, value)

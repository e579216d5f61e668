"""Messages and their parts: text, images, documents, audio, video, and the model's reasoning."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

import attrs

from .calls import ToolCall
from .frozen import by_value, immutable
from .provider import ProviderItem


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class TextPart:
    """Text inside a multimodal message."""

    text: str


def _one_image_source(image: ImagePart, _attribute: Any, _value: Any) -> None:
    if (image.url is None) == (image.data is None):
        msg = "an image needs exactly one of url= or data= (base64)"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ImagePart:
    """An image inside a user message, by ``url`` or by base64 ``data`` with ``media_type``."""

    url: Optional[str] = None
    data: Optional[str] = None
    media_type: str = attrs.field(default="image/png", validator=_one_image_source)

    def as_data_url(self) -> str:
        """The image as a URL: the given one, or a ``data:`` URL built from the base64."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


def _check_text(owner: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_self: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, str) or not value:
            msg = f"{owner} {attribute.name} must be a non-empty str, got {value!r:.60}"
            raise ValueError(msg) if isinstance(value, str) else TypeError(msg)

    return check


def _short(data: Optional[str]) -> str:
    # A repr (a log line, a traceback) shows how much, not megabytes of base64.
    return "None" if data is None else f"<{len(data)} chars of base64>"


def _one_document_source(doc: DocumentPart, _attribute: Any, _value: Any) -> None:
    if (doc.url is None) == (doc.data is None):
        msg = "a document needs exactly one of url= or data= (base64); build it with Llm.document"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class DocumentPart:
    """A document inside a user message (a PDF, plain text...): build it with ``Llm.document``.

    ``data`` is the file's bytes in base64, or ``url`` an http(s) address for the providers
    that fetch documents themselves; ``filename`` names it where the wire has a name.
    ``citations=True`` asks the model to cite it (Anthropic's ``citations.enabled``; the
    citations come back on ``CompletionResponse.citations``); other wires ignore it.
    """

    url: Optional[str] = None
    data: Optional[str] = attrs.field(default=None, repr=_short)
    media_type: str = attrs.field(
        default="application/pdf",
        validator=[_check_text("DocumentPart"), _one_document_source],
    )
    filename: Optional[str] = None
    citations: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))

    def as_data_url(self) -> str:
        """The document as a ``data:`` URL (OpenAI's ``file_data``); only for ``data``."""
        return f"data:{self.media_type};base64,{self.data}"


#: The audio formats blazen sends, with their media types (the two OpenAI takes inline).
AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mp3"}


def _check_audio_format(_self: Any, _attribute: Any, value: Any) -> None:
    if value not in AUDIO_FORMATS:
        msg = f"audio format must be one of {', '.join(AUDIO_FORMATS)}; got {value!r}"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class AudioPart:
    """A sound clip inside a user message, base64 ``data`` in ``format``: see ``Llm.audio``."""

    data: str = attrs.field(validator=_check_text("AudioPart"), repr=_short)
    format: str = attrs.field(default="wav", validator=_check_audio_format)

    @property
    def media_type(self) -> str:
        """The clip's media type: ``audio/wav`` or ``audio/mp3``."""
        return AUDIO_FORMATS[self.format]


def _check_video_type(video: VideoPart, _attribute: Any, media_type: Any) -> None:
    if (
        not isinstance(media_type, str)
        or not media_type[len("video/") :].strip()
        or (not media_type.startswith("video/"))
    ):
        msg = f"a video's media_type must be a type such as 'video/mp4', got {media_type!r:.60}"
        raise ValueError(msg)
    if (video.url is None) == (video.data is None):
        msg = "a video needs exactly one of url= or data= (base64); build it with Llm.video"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class VideoPart:
    """A video inside a user message: build it with ``Llm.video``.

    ``data`` is the file's bytes in base64, or ``url`` an address the provider fetches
    itself (a Gemini Files API URI, a public YouTube or http(s) URL).
    """

    url: Optional[str] = None
    data: Optional[str] = attrs.field(default=None, repr=_short)
    media_type: str = attrs.field(default="video/mp4", validator=_check_video_type)

    def as_data_url(self) -> str:
        """The video as a URL: the given one, or a ``data:`` URL built from the base64."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


ContentPart = Union[TextPart, ImagePart]
#: What ``ChatMessage.attachments`` holds.
Attachment = Union[DocumentPart, AudioPart, VideoPart]

_REASONING_KINDS = ("thinking", "redacted", "signature")


def _check_reasoning_kind(part: ReasoningPart, _attribute: Any, kind: Any) -> None:
    if kind not in _REASONING_KINDS:
        msg = f"reasoning part kind must be one of {', '.join(_REASONING_KINDS)}; got {kind!r}"
        raise ValueError(msg)
    for name in ("text", "signature", "data", "tool_call_id", "provider"):
        value = getattr(part, name)
        if value is not None and not isinstance(value, str):
            msg = f"reasoning part {name} must be a string, got {type(value).__name__}"
            raise TypeError(msg)
    if kind == "redacted" and not part.data:
        msg = "a redacted reasoning part needs its data (the provider's encrypted thinking)"
        raise ValueError(msg)
    if kind == "signature" and not part.signature:
        msg = "a signature reasoning part needs its signature"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ReasoningPart:
    """A piece of a model's reasoning as its provider sent it, kept to be sent back.

    Reasoning models prove their earlier thinking with opaque tokens that must come back
    unchanged on the next turn (Anthropic's thinking ``signature`` and
    ``redacted_thinking`` data, Gemini's ``thoughtSignature``); some OpenAI-compatible
    servers want the reasoning text back (DeepSeek's ``reasoning_content``).
    ``CompletionResponse.message`` carries them, so appending it to the conversation is all
    a caller does. ``kind`` is

    - ``"thinking"``: reasoning ``text``, with the provider's ``signature`` if it gave one;
    - ``"redacted"``: thinking the provider encrypted (Anthropic), in ``data``;
    - ``"signature"``: a bare ``signature`` that rides on another part: on the tool call
      ``tool_call_id`` names, or on the answer's text when that is None (Gemini).

    ``provider`` is the wire format that made it (``"anthropic"``, ``"gemini"``), or None
    for plain reasoning text; a signed part is sent back only on its own wire format.
    """

    kind: str = attrs.field(default="thinking", validator=_check_reasoning_kind)
    text: str = ""
    signature: Optional[str] = None
    data: Optional[str] = None
    tool_call_id: Optional[str] = None
    provider: Optional[str] = None


_ROLES = ("system", "user", "assistant", "tool")


def _check_role(_self: Any, _attribute: Any, role: Any) -> None:
    if role not in _ROLES:
        msg = f"message role must be one of {', '.join(_ROLES)}; got {role!r}"
        raise ValueError(msg)


def _check_content(_self: Any, _attribute: Any, content: Any) -> None:
    if content is not None and not isinstance(content, str):
        msg = f"message content must be a string, got {type(content).__name__}"
        raise TypeError(msg)


def _check_cache(_self: Any, _attribute: Any, cache: Any) -> None:
    if type(cache) is not bool:
        msg = f"message cache must be True or False, got {cache!r}"
        raise TypeError(msg)


# OpenAI answers a name with any of these with a 400 ("does not match '^[^\\s<|\\\\/>]+$'"): refused
# here instead, when the message is built.
_BAD_NAME_CHARS = frozenset("<|\\/>")


def _check_name(_self: Any, _attribute: Any, name: Any) -> None:
    if name is None:
        return
    if not isinstance(name, str):
        msg = f"message name must be a string or None, got {type(name).__name__}"
        raise TypeError(msg)
    if not name or any(c.isspace() or c in _BAD_NAME_CHARS for c in name):
        msg = f"message name must be non-empty, without whitespace or any of <|\\/>; got {name!r}"
        raise ValueError(msg)


def _parts_tuple(parts: Iterable[ReasoningPart]) -> tuple[ReasoningPart, ...]:
    return tuple(parts)


def _check_reasoning_parts(message: Any, _attribute: Any, parts: tuple[Any, ...]) -> None:
    for part in parts:
        if not isinstance(part, ReasoningPart):
            msg = f"reasoning_parts must hold ReasoningPart values, got {type(part).__name__}"
            raise TypeError(msg)
    if parts and message.role != "assistant":
        # Sent back in a user or tool turn, the provider would refuse the whole request.
        msg = f"only an assistant turn has reasoning_parts, not a {message.role} message"
        raise ValueError(msg)


def _items_tuple(items: Iterable[ProviderItem]) -> tuple[ProviderItem, ...]:
    return tuple(items)


def _check_provider_items(message: Any, _attribute: Any, items: tuple[Any, ...]) -> None:
    for item in items:
        if not isinstance(item, ProviderItem):
            msg = f"provider_items must hold ProviderItem values, got {type(item).__name__}"
            raise TypeError(msg)
    if items and message.role != "assistant":
        msg = f"only an assistant turn has provider_items, not a {message.role} message"
        raise ValueError(msg)


def _check_is_error(message: ChatMessage, _attribute: Any, is_error: Any) -> None:
    if type(is_error) is not bool:
        msg = f"message is_error must be True or False, got {is_error!r}"
        raise TypeError(msg)
    if is_error and message.role != "tool":
        msg = "only a tool result (Llm.tool_result) can be an error"
        raise ValueError(msg)


def _check_attachments(message: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(a, (DocumentPart, AudioPart, VideoPart)) for a in value
    ):
        msg = (
            "message attachments must be a tuple of Llm.document(...), Llm.audio(...) and "
            "Llm.video(...) values"
        )
        raise TypeError(msg)
    # Only a user turn can carry them on every wire; elsewhere they would be dropped.
    if value and message.role != "user":
        msg = f"only user messages take attachments (Llm.user), not a {message.role} message"
        raise ValueError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, weakref_slot=False, repr=False, eq=False)
class ChatMessage:
    """One message of a conversation. Build them with ``Llm.system/user/assistant/tool_result``.

    ``name`` tells participants of the same role apart (the Kotlin seed's ``name``):
    OpenAI-format wires send it on system, user and assistant messages; Anthropic, Gemini
    and Ollama have no such field and leave it out.
    """

    role: str = attrs.field(validator=_check_role)
    content: Optional[str] = attrs.field(default=None, validator=_check_content)
    images: tuple[ImagePart, ...] = ()
    #: Documents, audio and video (``Llm.document``, ``Llm.audio``, ``Llm.video``): documents
    #: and video go before the text and audio after it, as the providers' guides show them.
    attachments: tuple[Attachment, ...] = attrs.field(default=(), validator=_check_attachments)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: Optional[str] = None
    #: A prompt-cache breakpoint after this message (Anthropic's ``cache_control``; other
    #: providers cache by themselves and ignore it).
    cache: bool = attrs.field(default=False, validator=_check_cache)
    name: Optional[str] = attrs.field(default=None, validator=_check_name)
    #: The provider's reasoning of an assistant turn, with its signatures, to be sent back
    #: as it came (see :class:`ReasoningPart`).
    reasoning_parts: tuple[ReasoningPart, ...] = attrs.field(
        default=(), converter=_parts_tuple, validator=_check_reasoning_parts
    )
    #: A tool result that reports a failure (Anthropic ``is_error``, Gemini ``error``).
    is_error: bool = attrs.field(default=False, validator=_check_is_error)
    #: The turn as its provider sent it, sent back so on that provider's wire only (see
    #: :class:`ProviderItem`); ``CompletionResponse.message`` fills it in.
    provider_items: tuple[ProviderItem, ...] = attrs.field(
        default=(), converter=_items_tuple, validator=_check_provider_items
    )

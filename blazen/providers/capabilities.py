"""What each wire format can send: reasoning, documents, audio, video, caching, typed output.

One table, :data:`WIRES`, read by the wire formats (an attachment a wire cannot send is an
:class:`~blazen.UnsupportedError` raised from here, before anything is sent) and by the
docs' provider table (:func:`blazen.providers.registry.markdown_table`), so the table
cannot claim what the code refuses. A test checks the reasoning columns against what each
wire's request builder does.
"""

from __future__ import annotations

from typing import Optional

import attrs

from .._types import Attachment, AudioPart, DocumentPart, VideoPart, immutable
from ..errors import UnsupportedError

__all__ = [
    "VIDEO_PRESETS",
    "WIRES",
    "Capabilities",
    "check_attachment",
    "table_cells",
    "takes_video",
]


@immutable
@attrs.frozen(kw_only=True)
class Capabilities:
    """What one wire format can send, and where each request option goes on it."""

    #: The field ``reasoning_effort`` goes to, or None when the wire refuses it.
    reasoning_effort: Optional[str]
    #: The field ``reasoning_budget`` goes to, or None when the wire refuses it.
    reasoning_budget: Optional[str]
    #: The document media types it takes (``"text/*"`` takes every ``text/`` type).
    documents: tuple[str, ...] = ()
    #: The media types it takes by URL (the provider fetches them).
    document_urls: tuple[str, ...] = ()
    #: How documents are sent, for the docs' provider table.
    documents_as: str = ""
    #: How audio clips (wav, mp3) are sent, or "" when it cannot take audio.
    audio_as: str = ""
    #: How videos are sent (bytes and URLs), or "" when it cannot take video.
    video_as: str = ""
    #: What prompt caching it does, for the docs' provider table.
    caching: str
    #: Where ``output=`` (typed output) goes, for the docs' provider table.
    typed_output: str

    def takes_document(self, media_type: str, *, by_url: bool) -> bool:
        """Whether a document of ``media_type`` can be sent (by URL when ``by_url``)."""
        allowed = self.document_urls if by_url else self.documents
        return any(
            media_type == t or (t.endswith("/*") and media_type.startswith(t[:-1])) for t in allowed
        )


#: Every wire format's capabilities, by wire name.
WIRES: dict[str, Capabilities] = {
    # https://platform.openai.com/docs/guides/pdf-files: chat completions take PDFs only, as
    # base64 file_data or an uploaded file id, never by URL.
    # https://platform.openai.com/docs/guides/audio: input_audio takes wav and mp3.
    # Chat completions document no video part (images, audio and files only).
    "openai": Capabilities(
        reasoning_effort="`reasoning_effort`",
        reasoning_budget=None,
        documents=("application/pdf",),
        documents_as="PDF as a `file` part (base64; no URLs)",
        audio_as="`input_audio`",
        caching="automatic (`cached_tokens` reported)",
        typed_output="`response_format` (`json_schema`)",
    ),
    # https://docs.anthropic.com/en/docs/build-with-claude/pdf-support: PDFs as base64 or
    # by URL; plain text as a text source (citations docs). Claude reads no audio or video.
    "anthropic": Capabilities(
        reasoning_effort="`output_config.effort`",
        reasoning_budget="`thinking.budget_tokens` (`adaptive`: `thinking.type`)",
        documents=("application/pdf", "text/plain"),
        document_urls=("application/pdf",),
        documents_as="`document` blocks: PDF (base64 or URL), plain text",
        caching="explicit: `cache=True` puts a `cache_control` breakpoint",
        typed_output='`output_config.format` (a forced tool with `structured_output="tool"`)',
    ),
    # https://ai.google.dev/gemini-api/docs/document-processing and .../audio: inline
    # base64 data or a file URI, by MIME type. .../video-understanding: video the same way,
    # inline (under 100 MB) or as a Files API URI, a YouTube URL or another fetchable URL.
    "gemini": Capabilities(
        reasoning_effort="`thinkingLevel`",
        reasoning_budget="`thinkingBudget` (`adaptive`: -1)",
        documents=("application/pdf", "text/*"),
        document_urls=("application/pdf", "text/*"),
        documents_as="PDF and text as `inlineData` or `fileData` (URL)",
        audio_as="`inlineData`",
        video_as="`inlineData` or `fileData` (URL)",
        caching="automatic (`cached_tokens` reported)",
        typed_output="`generationConfig.responseJsonSchema`",
    ),
    # https://platform.openai.com/docs/guides/pdf-files: the Responses API takes PDFs as
    # input_file, base64 file_data or a file_url; it documents no audio input.
    "responses": Capabilities(
        reasoning_effort="`reasoning.effort` (summaries on)",
        reasoning_budget=None,
        documents=("application/pdf",),
        document_urls=("application/pdf",),
        documents_as="PDF as an `input_file` (base64 or URL)",
        caching="automatic (`cached_tokens` reported)",
        typed_output="`text.format` (`json_schema`)",
    ),
    # Ollama's /api/chat takes text and base64 images only (no documents, audio or video).
    "ollama": Capabilities(
        reasoning_effort="`think`",
        reasoning_budget=None,
        caching="none reported",
        typed_output="`format` (JSON schema)",
    ),
}


#: Presets of the OpenAI wire whose servers take video, as the ``video_url`` part their docs
#: show (chat completions itself has none): the provider table's cell for each.
VIDEO_PRESETS: dict[str, str] = {
    # https://openrouter.ai/docs/features/multimodal/videos: a URL or a base64 data URL.
    "openrouter": "`video_url` (URL or base64)",
    # https://docs.vllm.ai/en/stable/features/multimodal_inputs/: video models take
    # video_url the same way.
    "vllm": "`video_url` (URL or base64)",
}


def _wires_that(takes: str) -> str:
    names = [name for name, caps in WIRES.items() if getattr(caps, takes)]
    if takes == "video_as":
        names += sorted(VIDEO_PRESETS)
    return ", ".join(names)


def takes_video(provider: str, wire: str) -> bool:
    """Whether ``provider`` (a factory's name) on ``wire`` can send a video."""
    return bool(WIRES[wire].video_as) or (wire == "openai" and provider in VIDEO_PRESETS)


def check_attachment(provider: str, wire: str, part: Attachment) -> None:
    """Raise :class:`~blazen.UnsupportedError` if ``wire`` cannot send ``part``."""
    caps = WIRES[wire]
    if isinstance(part, AudioPart):
        if caps.audio_as:
            return
        msg = (
            f"{provider} cannot take audio; transcribe the clip and send the text, or use a "
            f"provider whose wire takes audio ({_wires_that('audio_as')})"
        )
        raise UnsupportedError(msg, provider=provider)
    if isinstance(part, VideoPart):
        if takes_video(provider, wire):
            return
        msg = (
            f"{provider} cannot take video; send frames as images (Llm.image), or use a "
            f"provider whose wire takes video ({_wires_that('video_as')})"
        )
        raise UnsupportedError(msg, provider=provider)
    doc: DocumentPart = part
    by_url = doc.url is not None
    if caps.takes_document(doc.media_type, by_url=by_url):
        return
    if not caps.documents:
        msg = (
            f"{provider} cannot take documents; put the document's text in the message, or "
            f"use a provider whose wire takes documents ({_wires_that('documents')})"
        )
    elif by_url and caps.takes_document(doc.media_type, by_url=False):
        msg = (
            f"{provider} cannot fetch a document by URL; download it and pass its bytes or "
            "path to Llm.document"
        )
    else:
        msg = (
            f"{provider} cannot take {doc.media_type} documents"
            f"{' by URL' if by_url else ''} (it takes {', '.join(caps.documents)}); convert "
            "it to PDF, or put its text in the message"
        )
    raise UnsupportedError(msg, provider=provider)


def table_cells(wire: str, provider: str = "") -> tuple[str, str, str, str, str, str]:
    """The table's reasoning, documents, audio, video, caching and typed-output cells.

    ``provider`` (a factory's name) picks the video cell of presets that take video.
    """
    caps = WIRES[wire]
    video = caps.video_as or (VIDEO_PRESETS.get(provider, "") if wire == "openai" else "")
    reasoning = [
        f"{knob}: {field}"
        for knob, field in (("effort", caps.reasoning_effort), ("budget", caps.reasoning_budget))
        if field
    ]
    return (
        ", ".join(reasoning) or "no",
        caps.documents_as or "no",
        caps.audio_as or "no",
        video or "no",
        caps.caching,
        caps.typed_output,
    )

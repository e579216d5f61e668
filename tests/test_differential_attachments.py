"""Differential tests: the request bodies the official SDKs send for documents, audio and
prompt caching, beside blazen's.

The same inputs go to a real local server once through the official ``openai`` or
``anthropic`` package and once through blazen; the JSON bodies recorded must agree field by
field. Where the SDK encodes a file itself (the ``anthropic`` SDK base64-encodes a path given
as a PDF source's ``data``), blazen's encoding is checked against it.
"""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import openai

from blazen import Llm
from blazen.testing import StreamServer

from .conftest import blazen_request_body, text_reply

PDF = b"%PDF-1.4\n% blazen differential document\n" + bytes(range(256))
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00" + bytes(range(64))
PDF_URL = "https://example.com/papers/attention.pdf"


def _openai_sdk_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    with (
        StreamServer([text_reply("openai")]) as server,
        openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client,
    ):
        for _ in client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        ):
            pass
        body: dict[str, Any] = server.requests[0].json()
        return body


def _anthropic_sdk_body(**kwargs: Any) -> dict[str, Any]:
    with (
        StreamServer([text_reply("anthropic")]) as server,
        anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as client,
    ):
        for _ in client.messages.create(model="claude-x", max_tokens=1024, stream=True, **kwargs):
            pass
        body: dict[str, Any] = server.requests[0].json()
        return body


def _field_by_field(ours: dict[str, Any], sdk: dict[str, Any]) -> None:
    assert sorted(ours) == sorted(sdk)
    for key in sdk:
        assert ours[key] == sdk[key], key


def test_openai_pdf_file_part_matches_the_openai_sdk(tmp_path):
    """A PDF from a path goes out as the openai SDK sends a ``file`` part."""
    path = tmp_path / "paper.pdf"
    path.write_bytes(PDF)
    data_url = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    sdk = _openai_sdk_body(
        [
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"filename": "paper.pdf", "file_data": data_url}},
                    {"type": "text", "text": "Summarise the paper."},
                ],
            }
        ]
    )
    msg = Llm.user("Summarise the paper.", attachments=[Llm.document(path)])
    _field_by_field(blazen_request_body("openai", Llm.completion_request([msg])), sdk)


def test_openai_input_audio_matches_the_openai_sdk():
    """A wav clip goes out as the openai SDK sends ``input_audio``."""
    sdk = _openai_sdk_body(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Transcribe this."},
                    {
                        "type": "input_audio",
                        "input_audio": {"data": base64.b64encode(WAV).decode(), "format": "wav"},
                    },
                ],
            }
        ]
    )
    msg = Llm.user("Transcribe this.", attachments=[Llm.audio(WAV, format="wav")])
    _field_by_field(blazen_request_body("openai", Llm.completion_request([msg])), sdk)


def test_anthropic_pdf_matches_the_anthropic_sdk_encoding_the_file_itself(tmp_path):
    """The anthropic SDK base64-encodes a path given as ``data``; blazen's bytes agree."""
    path = tmp_path / "paper.pdf"
    path.write_bytes(PDF)
    sdk = _anthropic_sdk_body(
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": path},
                        "title": "paper.pdf",
                    },
                    {"type": "text", "text": "Summarise the paper."},
                ],
            }
        ]
    )
    msg = Llm.user("Summarise the paper.", attachments=[Llm.document(path)])
    ours = blazen_request_body(
        "anthropic", Llm.completion_request([msg], model="claude-x", max_tokens=1024)
    )
    _field_by_field(ours, sdk)
    assert base64.b64decode(sdk["messages"][0]["content"][0]["source"]["data"]) == PDF


def test_anthropic_document_url_and_text_match_the_anthropic_sdk():
    """A PDF by URL and a plain-text document go out as the anthropic SDK sends them."""
    sdk = _anthropic_sdk_body(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "url", "url": PDF_URL}},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "Notes."},
                        "title": "notes.txt",
                    },
                    {"type": "text", "text": "Compare them."},
                ],
            }
        ]
    )
    docs = [
        Llm.document(PDF_URL),
        Llm.document(b"Notes.", media_type="text/plain", filename="notes.txt"),
    ]
    msg = Llm.user("Compare them.", attachments=docs)
    ours = blazen_request_body(
        "anthropic", Llm.completion_request([msg], model="claude-x", max_tokens=1024)
    )
    _field_by_field(ours, sdk)


def test_anthropic_cache_control_matches_the_anthropic_sdk():
    """cache=True on the system prompt and a turn puts cache_control where the SDK does."""
    doc = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(PDF).decode(),
        },
    }
    sdk = _anthropic_sdk_body(
        system=[
            {
                "type": "text",
                "text": "You are a careful reader.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        messages=[
            {
                "role": "user",
                "content": [
                    doc,
                    {
                        "type": "text",
                        "text": "Summarise.",
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
            {"role": "assistant", "content": "It is short."},
            {"role": "user", "content": "Shorter."},
        ],
    )
    req = Llm.completion_request(
        [
            Llm.system("You are a careful reader.", cache=True),
            Llm.user("Summarise.", attachments=[Llm.document(PDF)], cache=True),
            Llm.assistant("It is short."),
            Llm.user("Shorter."),
        ],
        model="claude-x",
        max_tokens=1024,
    )
    _field_by_field(blazen_request_body("anthropic", req), sdk)

"""Video: ``Llm.video`` built from bytes, files and URLs, sent to Gemini, refused elsewhere.

The request fixtures under ``tests/fixtures/gemini/requests/video_*.json`` hold the bodies
of Gemini's video-understanding guide
(https://ai.google.dev/gemini-api/docs/video-understanding: inline base64 data, or a
``fileData`` URI such as a YouTube link; the video before the prompt, as its best practices
say), in the camelCase names blazen sends. When google-genai is installed, the parts are
also checked against its own ``types.Part`` built the SDK's way.
"""

from __future__ import annotations

import base64
import json

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.providers.capabilities import VIDEO_PRESETS, takes_video
from blazen.providers.registry import PROVIDERS
from blazen.testing import Recorder

from .conftest import FIXTURES, NATIVE, PRESET_NAMES, model_for, ndjson_reply, sse_reply, stream

MP4 = b"\x00\x00\x00\x18ftypmp42"
YOUTUBE = "https://www.youtube.com/watch?v=9hE5-98ZeCg"
PROMPT = "Please summarize the video in 3 sentences."


def sent_contents(server, req) -> list:
    rec, resp = stream(server, model_for("gemini", server), req, sse_reply("text.sse", "gemini"))
    assert rec.error is None, rec.error
    assert resp is not None and resp.content
    return server.requests[-1].json()["contents"]


def fixture(name: str) -> list:
    return json.loads((FIXTURES / "gemini" / "requests" / name).read_text())["contents"]


def test_gemini_video_bytes_are_inline_data_before_the_prompt(server):
    """Llm.video(bytes) reaches Gemini as ``inlineData`` with its MIME type, before the text."""
    msg = Llm.user(PROMPT, attachments=[Llm.video(MP4)])
    ours = sent_contents(server, Llm.completion_request([msg]))
    assert json.dumps(ours) == json.dumps(fixture("video_inline.json"))


def test_gemini_video_by_url_is_file_data(server):
    """A video URL (here YouTube's) reaches Gemini as ``fileData`` for Gemini to fetch."""
    msg = Llm.user(PROMPT, attachments=[Llm.video(YOUTUBE)])
    ours = sent_contents(server, Llm.completion_request([msg]))
    assert json.dumps(ours) == json.dumps(fixture("video_file_uri.json"))


def test_a_video_file_is_read_when_the_value_is_built(tmp_path, server):
    """A path is read and base64-encoded by Llm.video, with the media type given."""
    path = tmp_path / "clip.webm"
    path.write_bytes(MP4 * 3)
    part = Llm.video(path, media_type="video/webm")
    assert (part.data, part.media_type, part.url) == (
        base64.b64encode(MP4 * 3).decode(),
        "video/webm",
        None,
    )
    path.unlink()  # already read: sending does not touch the file
    ours = sent_contents(
        server, Llm.completion_request([Llm.user("What is it?", attachments=[part])])
    )
    assert ours[0]["parts"][0] == {"inlineData": {"mimeType": "video/webm", "data": part.data}}


@pytest.mark.parametrize(
    ("source", "media_type", "error", "match"),
    [
        (MP4, "image/png", blazen.ValidationError, "video type"),
        (MP4, "video", blazen.ValidationError, "video type"),
        (b"", "video/mp4", blazen.ValidationError, "empty"),
        ("/no/such/clip.mp4", "video/mp4", blazen.ValidationError, "does not exist"),
        (12, "video/mp4", TypeError, "bytes or a file path"),
    ],
)
def test_a_bad_video_is_refused_where_it_is_built(source, media_type, error, match):
    """A wrong media type, no bytes or a missing file fails at Llm.video, not in a stream."""
    with pytest.raises(error, match=match):
        Llm.video(source, media_type=media_type)


def test_a_video_part_needs_exactly_one_source():
    """VideoPart refuses both or neither of url= and data=."""
    with pytest.raises(ValueError, match="exactly one"):
        blazen.VideoPart(url=YOUTUBE, data="AAAA")
    with pytest.raises(ValueError, match="exactly one"):
        blazen.VideoPart()


def test_the_video_repr_shows_a_size_not_the_bytes():
    """A log line or traceback holding a video does not print megabytes of base64."""
    part = Llm.video(MP4 * 1000)
    assert base64.b64encode(MP4).decode() not in repr(part)
    assert "chars of base64" in repr(part)


@pytest.mark.parametrize(
    "name", [n for n in (*NATIVE, *PRESET_NAMES) if not takes_video(n, PROVIDERS[n].wire)]
)
def test_every_provider_without_video_refuses_it_before_sending(server, name):
    """OpenAI-format, Anthropic and Ollama wires refuse a video: nothing reaches the server."""
    msg = Llm.user("Watch.", attachments=[Llm.video(MP4)])
    rec = Recorder()
    Streaming.complete(model_for(name, server), Llm.completion_request([msg]), rec.handler)
    assert server.requests == []
    assert isinstance(rec.error, blazen.UnsupportedError), rec.error
    assert "cannot take video" in rec.error.message and "gemini" in rec.error.message


def test_ollama_refusal_names_what_to_send_instead(server):
    """The refusal says how to go on: frames as images, or a wire that takes video."""
    msg = Llm.user("Watch.", attachments=[Llm.video(MP4)])
    rec, _ = stream(
        server,
        model_for("ollama", server),
        Llm.completion_request([msg]),
        ndjson_reply("text.ndjson"),
    )
    assert isinstance(rec.error, blazen.UnsupportedError)
    assert "Llm.image" in rec.error.message


def test_the_responses_api_refuses_video_before_sending(server):
    """OpenAI's Responses API takes no video either: refused, nothing sent."""
    model = model_for("openai", server, api="responses")
    rec = Recorder()
    msg = Llm.user("Watch.", attachments=[Llm.video(MP4)])
    Streaming.complete(model, Llm.completion_request([msg]), rec.handler)
    assert server.requests == []
    assert isinstance(rec.error, blazen.UnsupportedError), rec.error


# -- OpenAI-format servers that document video: OpenRouter, vLLM --------------------------


@pytest.mark.parametrize("name", sorted(VIDEO_PRESETS))
@pytest.mark.parametrize("source", [MP4, YOUTUBE], ids=["bytes", "url"])
def test_openrouter_and_vllm_send_a_video_url_part_after_the_text(server, name, source):
    """As OpenRouter's video guide shows: the text, then ``video_url`` with a URL or a data URL."""
    part = Llm.video(source)
    msg = Llm.user(PROMPT, attachments=[part])
    rec, _ = stream(
        server, model_for(name, server), Llm.completion_request([msg]), sse_reply("text.sse")
    )
    assert rec.error is None, rec.error
    content = server.requests[-1].json()["messages"][0]["content"]
    want = (
        YOUTUBE if source == YOUTUBE else "data:video/mp4;base64," + base64.b64encode(MP4).decode()
    )
    assert content == [
        {"type": "text", "text": PROMPT},
        {"type": "video_url", "video_url": {"url": want}},
    ]


def test_the_openai_sdk_sends_the_same_video_url_part(server):
    """The openai SDK, given the same extra part, puts the same bytes on the wire as blazen."""
    openai = pytest.importorskip("openai")
    part = {"type": "video_url", "video_url": {"url": YOUTUBE}}
    text = {"type": "text", "text": PROMPT}
    server.add(sse_reply("text.sse"))
    client = openai.OpenAI(api_key="k", base_url=server.base_url)
    with client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": [text, part]}], stream=True
    ) as response:
        for _ in response:
            pass
    theirs = server.requests[-1].json()["messages"]
    msg = Llm.user(PROMPT, attachments=[Llm.video(YOUTUBE)])
    stream(
        server,
        model_for("openrouter", server),
        Llm.completion_request([msg]),
        sse_reply("text.sse"),
    )
    assert server.requests[-1].json()["messages"] == theirs


# -- google-genai's own types, when installed ---------------------------------------------


def test_gemini_video_parts_match_google_genai(server):
    """The parts blazen sends equal google-genai's Part.from_bytes / Part.from_uri, as JSON."""
    types = pytest.importorskip("google.genai.types")
    msg = Llm.user(PROMPT, attachments=[Llm.video(MP4), Llm.video(YOUTUBE)])
    ours = sent_contents(server, Llm.completion_request([msg]))[0]["parts"]
    theirs = [
        types.Part.from_bytes(data=MP4, mime_type="video/mp4"),
        types.Part.from_uri(file_uri=YOUTUBE, mime_type="video/mp4"),
        types.Part.from_text(text=PROMPT),
    ]
    dumped = [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in theirs]
    assert ours == dumped
    # And the SDK reads ours back to the same bytes and URI.
    back = [types.Part.model_validate_json(json.dumps(p)) for p in ours]
    assert back[0].inline_data.data == MP4 and back[0].inline_data.mime_type == "video/mp4"
    assert back[1].file_data.file_uri == YOUTUBE

"""Documents and audio: built from bytes, files and URLs, sent in each provider's shape.

Request fixtures under ``tests/fixtures/<provider>/requests/`` hold the request bodies the
providers' own guides show (their sample data replaced by this file's bytes; Gemini's in
the camelCase JSON names blazen sends, which the API takes as it takes snake_case). Each
case streams through a real loopback server and must send that body, byte for byte.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import attrs
import pytest

import blazen
from blazen import Llm, Streaming
from blazen.providers.capabilities import WIRES, table_cells
from blazen.providers.registry import PROVIDERS, markdown_table
from blazen.testing import Recorder

from .conftest import FIXTURES, model_for, ndjson_reply, sse_reply, stream

PDF = b"%PDF-1.4\n% blazen test document\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00"
ANTHROPIC_PDF_URL = (
    "https://assets.anthropic.com/m/1cd9d098ac3e6467/original/"
    "Claude-3-Model-Card-October-Addendum.pdf"
)
GEMINI_PDF_URL = "https://discovery.ucl.ac.uk/id/eprint/10089234/1/343019_3_art_0_py4t4l_convrt.pdf"


def request_fixture(provider: str, name: str) -> dict:
    return json.loads((FIXTURES / provider / "requests" / name).read_text())


def reply(wire: str):
    return ndjson_reply("text.ndjson") if wire == "ollama" else sse_reply("text.sse", wire)


def round_trip(server, name, req):
    """Stream ``req`` to ``server`` as provider ``name``; the body sent and the response."""
    rec, resp = stream(server, model_for(name, server), req, reply(PROVIDERS[name].wire))
    assert rec.error is None, rec.error
    assert resp is not None and resp.content
    return server.requests[-1].json(), resp


def same_json(ours, theirs):
    """Equal, key order included, as the bytes on the wire would be."""
    assert json.dumps(ours) == json.dumps(theirs)


def refused(server, name, req) -> blazen.UnsupportedError:
    rec = Recorder()
    Streaming.complete(model_for(name, server), req, rec.handler)
    assert server.requests == []
    assert isinstance(rec.error, blazen.UnsupportedError), rec.error
    return rec.error


# -- wire fixtures from the providers' guides ---------------------------------------------


def test_anthropic_pdf_as_base64_matches_the_pdf_guide(server):
    """Llm.document(bytes) reaches Anthropic as a base64 ``document`` block before the text."""
    want = request_fixture("anthropic", "document_base64.json")
    msg = Llm.user(
        "Which model has the highest human preference win rates across each use-case?",
        attachments=[Llm.document(PDF)],
    )
    req = Llm.completion_request([msg], max_tokens=1024, model="claude-sonnet-4-5")
    body, _ = round_trip(server, "anthropic", req)
    same_json(body["messages"], want["messages"])
    assert (body["model"], body["max_tokens"]) == (want["model"], want["max_tokens"])


def test_anthropic_pdf_by_url_matches_the_pdf_guide(server):
    """An http(s) URL is sent as a ``url`` source: Anthropic fetches the PDF itself."""
    want = request_fixture("anthropic", "document_url.json")
    msg = Llm.user(
        "What are the key findings in this document?",
        attachments=[Llm.document(ANTHROPIC_PDF_URL)],
    )
    body, _ = round_trip(server, "anthropic", Llm.completion_request([msg], max_tokens=1024))
    same_json(body["messages"], want["messages"])


def test_anthropic_plain_text_document_goes_as_a_text_source_with_its_title(server):
    """text/plain is sent as text (not base64), and ``filename`` becomes the ``title``."""
    want = request_fixture("anthropic", "document_text.json")
    doc = Llm.document(
        b"The grass is green. The sky is blue.", media_type="text/plain", filename="My Document"
    )
    msg = Llm.user("What color is the grass and sky?", attachments=[doc])
    body, _ = round_trip(server, "anthropic", Llm.completion_request([msg], max_tokens=1024))
    same_json(body["messages"], want["messages"])


def test_openai_pdf_as_a_file_part_matches_the_file_inputs_guide(server):
    """Llm.document reaches OpenAI as a ``file`` part with filename and a data: URL."""
    want = request_fixture("openai", "document_file.json")
    doc = Llm.document(PDF, filename="draconomicon.pdf")
    msg = Llm.user("What is the first dragon in the book?", attachments=[doc])
    body, _ = round_trip(server, "openai", Llm.completion_request([msg]))
    same_json(body["messages"], want["messages"])


def test_openai_audio_as_input_audio_matches_the_audio_guide(server):
    """Llm.audio reaches OpenAI as ``input_audio`` after the text."""
    want = request_fixture("openai", "input_audio.json")
    msg = Llm.user("What is in this recording?", attachments=[Llm.audio(WAV, format="wav")])
    req = Llm.completion_request([msg], model="gpt-4o-audio-preview")
    body, _ = round_trip(server, "openai", req)
    same_json(body["messages"], want["messages"])
    assert body["model"] == want["model"]


def test_gemini_pdf_inline_matches_the_document_guide(server):
    """A document reaches Gemini as ``inlineData`` before the prompt."""
    want = request_fixture("gemini", "document_inline.json")
    msg = Llm.user("Summarize this document", attachments=[Llm.document(PDF)])
    body, _ = round_trip(server, "gemini", Llm.completion_request([msg]))
    same_json(body["contents"], want["contents"])


def test_gemini_pdf_by_url_is_file_data(server):
    """A document URL reaches Gemini as ``fileData`` with its MIME type."""
    want = request_fixture("gemini", "document_file_uri.json")
    msg = Llm.user("Summarize this document", attachments=[Llm.document(GEMINI_PDF_URL)])
    body, _ = round_trip(server, "gemini", Llm.completion_request([msg]))
    same_json(body["contents"], want["contents"])


def test_gemini_audio_inline_matches_the_audio_guide(server):
    """An mp3 clip reaches Gemini as ``inlineData`` with ``audio/mp3``, after the prompt."""
    want = request_fixture("gemini", "audio_inline.json")
    msg = Llm.user("Describe this audio clip", attachments=[Llm.audio(MP3, format="mp3")])
    body, _ = round_trip(server, "gemini", Llm.completion_request([msg]))
    same_json(body["contents"], want["contents"])


def test_documents_precede_the_text_and_audio_follows_the_images(server):
    """One message with everything: documents, text, images, audio, in that order."""
    msg = Llm.user(
        "Compare.",
        images=[Llm.image(data="aW1n", media_type="image/png")],
        attachments=[Llm.audio(WAV), Llm.document(PDF, filename="a.pdf")],
    )
    body, _ = round_trip(server, "openai", Llm.completion_request([msg]))
    kinds = [part["type"] for part in body["messages"][0]["content"]]
    assert kinds == ["file", "text", "image_url", "input_audio"]


def test_a_cached_message_puts_its_breakpoint_after_the_document(server):
    """cache=True on a message with a document marks its last block (the text)."""
    msg = Llm.user("Summarise.", attachments=[Llm.document(PDF)], cache=True)
    body, _ = round_trip(server, "anthropic", Llm.completion_request([msg]))
    blocks = body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["document", "text"]
    assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == {"type": "ephemeral"}


def test_openai_gives_bytes_without_a_filename_a_neutral_one(server):
    """OpenAI's file_data wants a filename: bytes without one go as ``document.pdf``."""
    msg = Llm.user("Read.", attachments=[Llm.document(PDF)])
    body, _ = round_trip(server, "openai", Llm.completion_request([msg]))
    assert body["messages"][0]["content"][0]["file"]["filename"] == "document.pdf"


# -- what a provider cannot take: refused before sending ----------------------------------


def test_anthropic_audio_is_refused_before_sending(server):
    """Claude reads no audio: UnsupportedError naming the providers that do."""
    msg = Llm.user("Transcribe.", attachments=[Llm.audio(WAV)])
    err = refused(server, "anthropic", Llm.completion_request([msg]))
    assert "cannot take audio" in str(err) and "openai, gemini" in str(err)


@pytest.mark.parametrize("part", [Llm.document(PDF), Llm.audio(MP3, format="mp3")])
def test_ollama_refuses_documents_and_audio_before_sending(server, part):
    """Ollama's chat takes text and images only."""
    msg = Llm.user("Read.", attachments=[part])
    err = refused(server, "ollama", Llm.completion_request([msg]))
    assert "ollama cannot take" in str(err)


def test_openai_refuses_a_document_url_and_says_to_download_it(server):
    """Chat completions take no file URLs: download it and pass the bytes or path."""
    msg = Llm.user("Read.", attachments=[Llm.document("https://example.com/a.pdf")])
    err = refused(server, "openai", Llm.completion_request([msg]))
    assert "download it" in str(err)


def test_openai_refuses_documents_other_than_pdf(server):
    """Chat completions read PDFs only: a text document is refused, saying what to do."""
    doc = Llm.document(b"plain words", media_type="text/plain")
    err = refused(server, "openai", Llm.completion_request([Llm.user("Read.", attachments=[doc])]))
    assert "text/plain" in str(err) and "put its text in the message" in str(err)


def test_anthropic_refuses_a_text_document_by_url(server):
    """Anthropic fetches PDFs by URL, not text: refused before sending."""
    doc = Llm.document("https://example.com/a.txt", media_type="text/plain")
    refused(server, "anthropic", Llm.completion_request([Llm.user("Read.", attachments=[doc])]))


def test_a_refused_attachment_in_a_preset_names_that_preset(server):
    """An OpenAI-format preset's refusal names the preset, not ``openai``."""
    msg = Llm.user("Read.", attachments=[Llm.document("https://example.com/a.pdf")])
    err = refused(server, "groq", Llm.completion_request([msg]))
    assert str(err).startswith("groq")


# -- building the values: bytes, paths, URLs, and bad input -------------------------------


def test_a_path_is_read_and_encoded_when_the_document_is_built(tmp_path):
    """The file is read at build time: removing it afterwards changes nothing."""
    path = tmp_path / "report.pdf"
    path.write_bytes(PDF)
    doc = Llm.document(path)
    path.unlink()
    assert base64.b64decode(doc.data) == PDF
    assert doc.filename == "report.pdf" and doc.url is None


def test_a_str_path_and_an_explicit_filename(tmp_path):
    """A str path works as a Path does; an explicit filename wins over the file's name."""
    path = tmp_path / "clip.mp3"
    path.write_bytes(MP3)
    assert base64.b64decode(Llm.audio(str(path), format="mp3").data) == MP3
    doc = Llm.document(str(path), media_type="audio/mpeg", filename="x.bin")
    assert doc.filename == "x.bin"


@pytest.mark.parametrize("data", [bytearray(PDF), memoryview(PDF)])
def test_bytes_like_values_are_accepted(data):
    """bytearray and memoryview are bytes too."""
    assert base64.b64decode(Llm.document(data).data) == PDF


def test_a_missing_file_is_a_validation_error_at_build_time(tmp_path):
    """A path that does not exist fails on the Llm.document line, saying what to pass."""
    with pytest.raises(blazen.ValidationError, match="does not exist"):
        Llm.document(tmp_path / "nope.pdf")
    with pytest.raises(blazen.ValidationError, match="does not exist"):
        Llm.audio(str(tmp_path / "nope.wav"))


def test_a_directory_is_a_validation_error(tmp_path):
    """A directory is not a document."""
    with pytest.raises(blazen.ValidationError, match="is a directory"):
        Llm.document(tmp_path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_an_unreadable_file_is_a_validation_error(tmp_path):
    """A file that cannot be read fails at build time with the reason."""
    path = tmp_path / "secret.pdf"
    path.write_bytes(PDF)
    path.chmod(0)
    try:
        with pytest.raises(blazen.ValidationError, match="cannot be read"):
            Llm.document(path)
    finally:
        path.chmod(0o600)


def test_a_path_that_cannot_be_opened_is_a_validation_error():
    """A path the OS refuses (a NUL byte in it) fails at build time with the reason."""
    with pytest.raises(blazen.ValidationError, match="cannot be read"):
        Llm.document("report\x00.pdf")


def test_only_user_messages_take_attachments():
    """An assistant or system message with attachments is refused when built."""
    with pytest.raises(ValueError, match="only user messages take attachments"):
        blazen.ChatMessage(role="assistant", content="x", attachments=(Llm.document(PDF),))


def test_empty_data_and_empty_files_are_validation_errors(tmp_path):
    """Nothing to send is refused, from bytes or from a file."""
    with pytest.raises(blazen.ValidationError, match="empty"):
        Llm.document(b"")
    with pytest.raises(blazen.ValidationError, match="empty"):
        Llm.audio(b"")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(blazen.ValidationError, match="empty"):
        Llm.document(empty)


@pytest.mark.parametrize("bad", [42, None, ["a.pdf"], {"data": b"x"}, 1.5])
def test_non_bytes_non_paths_are_type_errors(bad):
    """Only bytes, paths and (for documents) URLs are accepted."""
    with pytest.raises(TypeError, match="bytes or a file path"):
        Llm.document(bad)
    with pytest.raises(TypeError, match="bytes or a file path"):
        Llm.audio(bad)


@pytest.mark.parametrize("fmt", ["ogg", "WAV", "", None, "audio/wav"])
def test_an_unknown_audio_format_is_a_validation_error(fmt):
    """format is "wav" or "mp3", and the error says to convert the clip."""
    with pytest.raises(blazen.ValidationError, match="wav, mp3"):
        Llm.audio(WAV, format=fmt)


def test_audio_by_url_is_refused_at_build_time():
    """No provider fetches audio by URL: say to download it."""
    with pytest.raises(blazen.ValidationError, match="download it"):
        Llm.audio("https://example.com/a.wav")


@pytest.mark.parametrize(
    "media_type", ["pdf", "", None, "application/pdf; x", 5, "application/pdf\n"]
)
def test_a_bad_media_type_is_a_validation_error(media_type):
    """media_type must look like ``type/subtype``."""
    with pytest.raises(blazen.ValidationError, match="media_type"):
        Llm.document(PDF, media_type=media_type)


def test_a_text_document_must_be_utf8():
    """text/* documents go to Anthropic as text, so they must decode now."""
    with pytest.raises(blazen.ValidationError, match="UTF-8"):
        Llm.document(b"\xff\xfe\x00", media_type="text/plain")


def test_a_bad_filename_is_refused():
    """filename is None or a non-empty string."""
    with pytest.raises(ValueError, match="filename"):
        Llm.document(PDF, filename="")
    with pytest.raises(TypeError, match="filename"):
        Llm.document(PDF, filename=3)


def test_attachments_must_be_document_or_audio_values():
    """A raw path or bytes in attachments is a TypeError saying to use the builders."""
    with pytest.raises(TypeError, match=r"Llm.document"):
        Llm.user("hi", attachments=["a.pdf"])
    with pytest.raises(TypeError, match=r"Llm.document"):
        Llm.user("hi", attachments=b"%PDF")
    one = Llm.document(PDF)
    assert Llm.user("hi", attachments=one).attachments == (one,)


def test_values_are_frozen_and_their_repr_hides_the_data():
    """DocumentPart and AudioPart are immutable; a repr shows a length, not the base64."""
    doc = Llm.document(PDF * 100)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        doc.data = "x"  # type: ignore[misc]
    assert doc.data not in repr(doc) and "chars of base64" in repr(doc)
    clip = Llm.audio(WAV)
    assert clip.data not in repr(clip) and clip.media_type == "audio/wav"
    assert Llm.user("hi", attachments=[doc]) == Llm.user(
        "hi", attachments=[Llm.document(PDF * 100)]
    )


def test_the_values_are_exported():
    """DocumentPart and AudioPart are public names."""
    assert blazen.DocumentPart is type(Llm.document(PDF))
    assert blazen.AudioPart is type(Llm.audio(WAV))


# -- the capability table: the docs' columns are what the code does --------------------


def test_the_docs_capability_columns_come_from_the_wire_table():
    """Each row's last six cells are its wire's cells in WIRES."""
    lines = markdown_table().splitlines()
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    assert header[-6:] == ["reasoning", "documents", "audio", "video", "caching", "typed output"]
    for line, info in zip(lines[2:], PROVIDERS.values()):
        cells = tuple(c.strip() for c in line.split("|")[1:-1])
        assert cells[-6:] == table_cells(info.wire, info.name), info.name
    assert markdown_table() in (Path(__file__).parent.parent / "docs" / "providers.md").read_text()


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("knob", ["reasoning_effort", "reasoning_budget"])
def test_the_reasoning_cells_say_what_each_wire_refuses(server, wire, knob):
    """A wire whose cell has no field for a reasoning option refuses it before sending."""
    value = "high" if knob == "reasoning_effort" else 2048
    req = Llm.completion_request([Llm.user("hi")], **{knob: value})
    rec, _ = stream(server, model_for(wire, server), req, reply(wire))
    takes = getattr(WIRES[wire], knob) is not None
    assert isinstance(rec.error, blazen.UnsupportedError) is (not takes), rec.error


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_the_audio_video_and_document_cells_say_what_each_wire_refuses(server, wire):
    """A wire whose cell says "no" refuses that attachment; one that says how sends it."""
    video = Llm.video(b"\x00\x00\x00\x18ftypmp42")
    for part, cell in ((Llm.audio(WAV), 2), (Llm.document(PDF), 1), (video, 3)):
        req = Llm.completion_request([Llm.user("hi", attachments=[part])])
        rec, _ = stream(server, model_for(wire, server), req, reply(wire))
        says_no = table_cells(wire)[cell] == "no"
        assert isinstance(rec.error, blazen.UnsupportedError) is says_no, (wire, rec.error)

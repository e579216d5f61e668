"""Keys never show: whatever the server echoes, wherever it puts it, and however they arrive.

A hostile server echoes the key in every place an error picks text up from: the error
body, ``error.type`` and ``error.code``, ``x-request-id``, a redirect's ``Location``, an
in-stream error event, bytes that fail to decode, JSON that fails to parse. Careless
callers pass keys with a file's newline or a pasted space. The key string must appear in no
exception's text, repr, args or fields, anywhere in the cause chain, in a printed traceback,
in a pickle or in a log record.
"""

from __future__ import annotations

import logging

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer, openai_sse, sse_event

from .texts import everything_about

KEY = "sk-hostile-0123456789abcdefXYZ"
REQ = Llm.completion_request([Llm.user("hi")])


def _model(server: StreamServer, key: str = KEY, **options: object) -> blazen.ChatModel:
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", server.base_url, api_key=key, **options)


ECHOES = {
    "error body": Reply.json({"error": {"message": f"bad key {KEY}"}}, status=401),
    "error.type": Reply.json({"error": {"message": "no", "type": KEY}}, status=401),
    "error.code": Reply.json({"error": {"message": "no", "code": KEY}}, status=400),
    "x-request-id": Reply.json(
        {"error": {"message": "no"}}, status=401, headers={"x-request-id": KEY}
    ),
    "Location": Reply(status=302, headers={"Location": f"https://evil.test/?k={KEY}"}),
    "in-stream error": Reply.sse(
        [*openai_sse(["a"])[:2], sse_event({"error": {"message": KEY, "type": KEY, "code": KEY}})]
    ),
    "undecodable bytes": Reply.sse([b'data: {"echo": "' + KEY.encode() + b'"}\xff\n\n']),
    "unparsable JSON": Reply.sse([b"data: {" + KEY.encode() + b"\n\n"]),
}


@pytest.mark.parametrize("where", list(ECHOES))
def test_a_key_the_server_echoes_shows_nowhere(where, caplog):
    caplog.set_level(logging.DEBUG, logger="blazen")
    with StreamServer([ECHOES[where]]) as server:
        rec = Recorder()
        Streaming.complete(_model(server), REQ, rec.handler)
    err = rec.error
    assert isinstance(err, blazen.BlazenError), rec.kinds
    assert KEY not in everything_about(err)
    assert KEY not in caplog.text


def test_a_key_with_a_files_newline_or_spaces_around_it_is_stripped():
    """api_key=open(path).read() works: the header carries the key alone."""
    with StreamServer([Reply.sse(openai_sse(["ok"]))]) as server:
        resp = Streaming.complete(_model(server, key=f"  {KEY}\n"), REQ)
        assert resp is not None and resp.content == "ok"
        assert server.requests[0].header("Authorization") == f"Bearer {KEY}"


def test_a_key_from_the_environment_with_a_newline_is_stripped(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    with StreamServer([Reply.sse(openai_sse(["ok"]))]) as server:
        model = blazen.Providers.openai(base_url=server.base_url, max_retries=0)
        assert Streaming.complete(model, REQ) is not None
        assert server.requests[0].header("Authorization") == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "bad",
    [f"{KEY[:10]} {KEY[10:]}", f"{KEY}\r\nX-Evil: 1", f"{KEY}\u2603"],
    ids=["space", "crlf", "non-latin-1"],
)
def test_a_key_that_cannot_be_a_header_is_refused_without_being_shown(bad):
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai(api_key=bad, base_url="http://127.0.0.1:9/v1")
    assert "api_key=" in caught.value.message
    assert KEY[:10] not in everything_about(caught.value)


def test_a_header_value_with_a_newline_is_refused_by_name_not_value():
    secret = "gw-" + KEY
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai(
            api_key=KEY, base_url="http://127.0.0.1:9/v1", headers={"X-Gateway-Key": secret + "\n"}
        )
    assert "X-Gateway-Key" in caught.value.message
    assert secret not in everything_about(caught.value)


@pytest.mark.parametrize("placeholder", ["ollama", "none", "x"])
def test_a_placeholder_key_is_no_secret_and_rewrites_no_text(placeholder):
    """api_key="ollama" guards nothing: the answer and errors keep the word as it was sent."""
    text = f"I run on {placeholder} here"
    body = [*openai_sse([text])[:2]]  # cut off before the end signal: an error with partial
    with StreamServer([Reply.sse(body)]) as server:
        rec = Recorder()
        Streaming.complete(_model(server, key=placeholder), REQ, rec.handler)
    assert isinstance(rec.error, blazen.ConnectionError)
    assert rec.error.partial == text
    assert rec.chunks[0].content_delta == text


def test_a_real_key_in_the_answer_is_masked_in_the_error_but_not_in_the_chunks():
    """The stream hands the caller what the model said; only what blazen reports is masked."""
    text = f"the key is {KEY}"
    with StreamServer([Reply.sse(openai_sse([text])[:2])]) as server:
        rec = Recorder()
        Streaming.complete(_model(server), REQ, rec.handler)
    assert rec.chunks[0].content_delta == text
    assert KEY not in everything_about(rec.error) and "***" in rec.error.partial


def test_a_callback_quoting_the_key_leaves_it_in_no_log_and_no_branch_of_the_chain(caplog):
    """The callback's own exception may quote what the server said: it is logged scrubbed,
    and a key deep in a __context__ branch of its chain is found and replaced too."""
    caplog.set_level(logging.DEBUG, logger="blazen")

    def on_chunk(chunk):
        try:
            try:
                raise ValueError(f"cannot handle {chunk.content_delta!r}")
            except ValueError as inner:
                raise RuntimeError("while handling") from inner
        except RuntimeError:
            raise KeyError("lookup failed") from None

    with StreamServer([Reply.sse(openai_sse([f"your key is {KEY}"]))]) as server:
        rec = Recorder()
        Streaming.complete(_model(server), REQ, on_chunk=on_chunk, on_error=rec.on_error)
    assert isinstance(rec.error, blazen.CallbackError)
    assert KEY not in everything_about(rec.error)
    assert KEY not in caplog.text and "on_chunk raised KeyError" in caplog.text

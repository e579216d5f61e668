"""After the provider's end signal the call returns within about a second (SPEC promise 11).

The server here sends ``[DONE]`` and then stays silent and open: no keep-alives (a
keep-alive every 0.3 s hid the bug in ``test_deadlines.py``), no close. Before, a
close-delimited body (no length, HTTP/1.0 style) waited ``idle_timeout`` before ``on_done``
and the return, and ``timeout=`` did not cut it: the one-second drain read its socket from
the connection object, which http.client had already set to None for such a response. A
response that says ``Connection: close`` waited as long as the server held it open.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import time

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder, Reply, Stall, StreamServer, openai_sse

from ..conftest import KEY_FOR_TESTS

REQ = Llm.completion_request([Llm.user("hi")])
#: About a second, generously: the bug is idle_timeout (12 s here) or the server's hold.
BOUND = 6.0

_EVENTS = openai_sse(["Hel", "lo"])
_HTTP10_HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"

REPLIES = {
    "close-delimited": Reply.sse([*_EVENTS, Stall()], transfer="close"),
    "http-1.0": Reply(body=[_HTTP10_HEAD, *_EVENTS, Stall()], raw=True),
    "chunked-connection-close": Reply.sse([*_EVENTS, Stall()], headers={"Connection": "close"}),
    "length-less-keep-alive": Reply.sse([*_EVENTS, Stall()]),
}


@pytest.mark.parametrize("shape", sorted(REPLIES))
@pytest.mark.parametrize("timeout", [None, 8.0])
def test_the_call_returns_within_about_a_second_of_done_on_a_silent_open_server(shape, timeout):
    """[DONE], then silence with the socket open: on_done and the return come at once."""
    rec = Recorder()
    with StreamServer([REPLIES[shape]]) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS,
                                               idle_timeout=12, max_retries=0)  # fmt: skip
        start = time.monotonic()
        resp = Streaming.complete(model, REQ, rec, timeout=timeout)
        took = time.monotonic() - start
        assert server.wait_closed(5)  # a body that may go on cannot be reused: closed
    assert resp is not None and resp.content == "Hello"
    assert rec.kinds[-1] == "done" and rec.kinds.count("done") == 1
    assert took < BOUND, f"{shape}: the call took {took:.1f} s after [DONE]"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_drain_budget_holds_over_tls_on_a_close_delimited_body(tmp_path):
    """The same over TLS: the budget times out the TLS socket the stream reads from."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    with StreamServer([REPLIES["close-delimited"]], ssl_context=ctx) as server:
        model = blazen.Providers.openai_compat("t", server.base_url, api_key=KEY_FOR_TESTS,
                                               idle_timeout=12, max_retries=0,
                                               verify=str(tmp_path / "cert.pem"))  # fmt: skip
        start = time.monotonic()
        resp = Streaming.complete(model, REQ)
        took = time.monotonic() - start
    assert resp is not None and resp.content == "Hello"
    assert took < BOUND, f"TLS: the call took {took:.1f} s after [DONE]"

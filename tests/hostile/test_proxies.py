"""Proxies and TLS settings: a proxy is one more place a stream can wait, fail or leak.

The proxies here misbehave on purpose, on real loopback sockets: one accepts TCP and never
answers ``CONNECT`` (or a plain-HTTP request), one refuses, one asks for credentials and
echoes what it was sent. Every wait still obeys cancel, Ctrl-C and ``timeout=``; every
failure names the proxy (with its password masked) rather than blaming ``base_url``; the
password shows in no error, chain, traceback or log record, and neither does one carried in
``base_url``. A ``verify=`` path that cannot be a CA bundle is refused before anything is sent.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import blazen
from blazen import CancelToken, Llm, Streaming
from blazen.testing import Recorder, Reply, StreamServer, openai_sse

from .texts import everything_about

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-proxy-test-0123456789abcdef"
PASSWORD = "s3cretpassw0rd"
#: What ``Proxy-Authorization`` (or ``Authorization``) carries for user:PASSWORD.
TOKEN = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
REQ = Llm.completion_request([Llm.user("hi")])

#: How a request reaches a proxy: HTTPS tunnels through CONNECT, plain HTTP is forwarded;
#: the variable that sets the proxy, the provider's URL, and how blazen talks to the proxy.
ROUTES = {
    "connect": ("HTTPS_PROXY", "https://api.example.test/v1", "http"),
    "plain": ("HTTP_PROXY", "http://api.example.test/v1", "http"),
    "tls-to-proxy": ("HTTPS_PROXY", "https://api.example.test/v1", "https"),
}
#: The routes on which a proxy that answers can be scripted (it speaks plain HTTP).
PLAIN_ROUTES = ["connect", "plain"]
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def _no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only what a test sets: not the developer's own proxy, nor a NO_PROXY naming loopback.
    for var in PROXY_VARIABLES:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)


@pytest.fixture
def silent_proxy() -> Iterator[int]:
    """The port of a proxy that completes TCP handshakes and never reads or writes a byte."""
    # The kernel accepts connections into the backlog; nobody ever reads them.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()
    return port


def _proxy_url(port: int, route: str = "connect") -> str:
    return f"{ROUTES[route][2]}://user:{PASSWORD}@127.0.0.1:{port}"


def _through(
    monkeypatch: pytest.MonkeyPatch, route: str, proxy: str, **options: object
) -> blazen.ChatModel:
    """A model whose requests go through ``proxy``, set the way users set it."""
    var, base, _ = ROUTES[route]
    monkeypatch.setenv(var, proxy)
    options.setdefault("max_retries", 0)
    return blazen.Providers.openai_compat("test", base, api_key=KEY, **options)


def _assert_nothing_shows(err: BaseException, logs: str) -> None:
    text = everything_about(err)
    assert PASSWORD not in text and TOKEN not in text, text
    assert PASSWORD not in logs and TOKEN not in logs


# --- waits: a silent proxy is waited on like anything else --------------------------------


@pytest.mark.parametrize("connect_timeout", [None, 10.0])
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_cancel_from_another_thread_ends_a_wait_on_a_silent_proxy(
    complete, monkeypatch, silent_proxy, route, connect_timeout
):
    """Waiting for CONNECT's answer (or a forwarded request's) ends at cancel, one terminal."""
    proxy = _proxy_url(silent_proxy, route)
    model = _through(monkeypatch, route, proxy, connect_timeout=connect_timeout)
    token = CancelToken()
    timer = threading.Timer(0.3, token.cancel)
    timer.start()
    rec = Recorder()
    start = time.monotonic()
    complete(model, REQ, rec.handler, cancel=token)
    took = time.monotonic() - start
    timer.join()
    assert rec.kinds == ["error"] and isinstance(rec.error, blazen.CancelledError), rec.kinds
    assert took < 1.3, took


@pytest.mark.parametrize("connect_timeout", [None, 10.0])
@pytest.mark.parametrize("route", list(ROUTES))
def test_the_total_timeout_ends_a_wait_on_a_silent_proxy(
    complete, monkeypatch, silent_proxy, route, connect_timeout
):
    """timeout= counts the time spent on the proxy: a TimeoutError naming the total limit."""
    proxy = _proxy_url(silent_proxy, route)
    model = _through(monkeypatch, route, proxy, connect_timeout=connect_timeout)
    rec = Recorder()
    start = time.monotonic()
    complete(model, REQ, rec.handler, timeout=0.5)
    took = time.monotonic() - start
    assert rec.kinds == ["error"], rec.kinds
    assert isinstance(rec.error, blazen.TimeoutError) and rec.error.limit == "total"
    assert took < 1.5, took


@pytest.mark.parametrize("route", ["connect", "tls-to-proxy"])
def test_a_proxy_that_never_answers_connect_is_a_connect_timeout_naming_the_proxy(
    monkeypatch, silent_proxy, caplog, route
):
    """Not "the TLS handshake with the provider" nor "is base_url right": the proxy is named."""
    caplog.set_level(logging.DEBUG)
    proxy = _proxy_url(silent_proxy, route)
    model = _through(monkeypatch, route, proxy, connect_timeout=0.3)
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(model, REQ, rec.handler)
    took = time.monotonic() - start
    err = rec.error
    assert rec.kinds == ["error"] and isinstance(err, blazen.TimeoutError), repr(err)
    assert err.limit == "connect" and took < 1.3, (err.limit, took)
    assert f"proxy {proxy.replace(PASSWORD, '***')}" in err.message, err.message
    assert "HTTPS_PROXY" in err.message and "TLS handshake" not in err.message
    _assert_nothing_shows(err, caplog.text)


CTRL_C = textwrap.dedent(
    """
    import os, socket, sys
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts TCP into its backlog and never answers
    var, base = sys.argv[1], sys.argv[2]
    os.environ[var] = "http://user:pw@127.0.0.1:%d" % listener.getsockname()[1]
    from blazen import Llm, Providers, Streaming
    model = Providers.openai_compat("test", base, api_key="k", connect_timeout=None)
    print("ready", flush=True)
    try:
        Streaming.complete(
            model, Llm.completion_request([Llm.user("hi")]),
            on_error=lambda e: print("on_error", type(e).__name__, flush=True),
        )
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        raise
    """
)


@pytest.mark.parametrize("route", PLAIN_ROUTES)
def test_ctrl_c_ends_a_wait_on_a_silent_proxy(route):
    """SIGINT while a proxy sits on CONNECT: CancelledError once, then KeyboardInterrupt."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(ROOT)
    var, base, _ = ROUTES[route]
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C, var, base],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # inside complete(), waiting on the proxy
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out.splitlines() == ["on_error CancelledError", "KeyboardInterrupt"], err
    assert took < 1.5, took


# --- failures are the proxy's, and its password shows nowhere -----------------------------


def _connect_407(server: StreamServer) -> None:
    # A proxy that refuses the tunnel, echoing the credentials it was sent as its reason.
    server.add(Reply(raw=True, body=[f"HTTP/1.1 407 {TOKEN} {PASSWORD}\r\n\r\n".encode()]))


def _plain_407(server: StreamServer) -> None:
    # A forwarding proxy asking for credentials, echoing the headers it got in its page.
    echo = f"Proxy-Authorization: Basic {TOKEN} ({PASSWORD})"
    server.add(
        Reply.json(
            {"error": {"message": echo}},
            status=407,
            headers={"Proxy-Authenticate": 'Basic realm="proxy"', "X-Echo": echo},
        )
    )


@pytest.mark.parametrize(
    ("route", "answer"), [("connect", _connect_407), ("plain", _plain_407)], ids=PLAIN_ROUTES
)
def test_a_proxy_asking_for_credentials_is_a_proxy_error_that_shows_no_password(
    monkeypatch, caplog, route, answer
):
    """HTTP 407 is the proxy's answer, not the provider's; what it echoes back is masked."""
    caplog.set_level(logging.DEBUG)
    with StreamServer() as proxy:
        answer(proxy)
        model = _through(monkeypatch, route, _proxy_url(proxy.port))
        rec = Recorder()
        Streaming.complete(model, REQ, rec.handler)
    err = rec.error
    assert rec.kinds == ["error"] and isinstance(err, blazen.ConnectionError), repr(err)
    assert "407" in err.message and f"http://user:***@127.0.0.1:{proxy.port}" in err.message
    assert ROUTES[route][0] in err.message, err.message
    assert not err.retryable  # the same credentials would be refused again
    _assert_nothing_shows(err, caplog.text)


@pytest.mark.parametrize("route", PLAIN_ROUTES)
def test_a_proxy_refusing_connections_is_named_and_shows_no_password(
    monkeypatch, caplog, closed_port, route
):
    """Connection refused by the proxy: the message names it, masked, and not base_url."""
    caplog.set_level(logging.DEBUG)
    model = _through(monkeypatch, route, _proxy_url(closed_port))
    rec = Recorder()
    Streaming.complete(model, REQ, rec.handler)
    err = rec.error
    assert rec.kinds == ["error"] and isinstance(err, blazen.ConnectionError), repr(err)
    assert f"proxy http://user:***@127.0.0.1:{closed_port}" in err.message, err.message
    assert ROUTES[route][0] in err.message and "refused" in err.message, err.message
    assert "base_url" not in err.message and "Max retries" not in err.message, err.message
    _assert_nothing_shows(err, caplog.text)


def test_a_proxy_whose_name_does_not_resolve_is_named_and_shows_no_password(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    model = _through(monkeypatch, "connect", f"http://user:{PASSWORD}@proxy.invalid:3128")
    rec = Recorder()
    Streaming.complete(model, REQ, rec.handler)
    err = rec.error
    assert rec.kinds == ["error"] and isinstance(err, blazen.ConnectionError), repr(err)
    assert "proxy http://user:***@proxy.invalid:3128" in err.message, err.message
    assert "base_url" not in err.message
    _assert_nothing_shows(err, caplog.text)


@pytest.mark.parametrize(
    "setting",
    [
        f"http://user:{PASSWORD}@127.0.0.1:99999",
        f"http://user:{PASSWORD}@127.0.0.1:port",
        f"http://user:{PASSWORD}@[::1:3128",
        f"http://user:{PASSWORD}@:3128",
        f"ftp://user:{PASSWORD}@127.0.0.1:3128",
        f"socks5://user:{PASSWORD}@127.0.0.1:1080",
    ],
    ids=["port-too-big", "port-not-a-number", "bad-ipv6", "no-host", "ftp", "socks"],
)
def test_a_proxy_setting_that_cannot_be_used_is_refused_when_the_model_is_built(
    monkeypatch, caplog, setting
):
    """A ValidationError naming the variable, the URL masked: not "the URL for test"."""
    caplog.set_level(logging.DEBUG)
    with pytest.raises(blazen.ValidationError) as caught:
        _through(monkeypatch, "connect", setting)
    err = caught.value
    assert "HTTPS_PROXY" in err.message and "proxy" in err.message, err.message
    assert "user:***@" in err.message, err.message
    _assert_nothing_shows(err, caplog.text)


def test_a_proxy_setting_the_url_bypasses_is_not_read(monkeypatch):
    """NO_PROXY naming the host: a broken HTTPS_PROXY is not this model's concern."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("HTTPS_PROXY", "ftp://nowhere")
    monkeypatch.setenv("HTTP_PROXY", "ftp://nowhere")
    with StreamServer([Reply.sse(openai_sse(["ok"]))]) as server:
        model = blazen.Providers.openai_compat("test", server.base_url, max_retries=0)
        resp = Streaming.complete(model, REQ)
    assert resp is not None and resp.content == "ok"


# --- a base_url carrying user:password@ ---------------------------------------------------


def test_a_password_in_base_url_shows_neither_in_repr_nor_in_errors_nor_logs(caplog, closed_port):
    caplog.set_level(logging.DEBUG)
    model = blazen.Providers.openai_compat(
        "test", f"http://user:{PASSWORD}@127.0.0.1:{closed_port}/v1", api_key=KEY, max_retries=1
    )
    assert PASSWORD not in repr(model) and "user:***@" in repr(model), repr(model)
    rec = Recorder()
    Streaming.complete(model, REQ, rec.handler)
    err = rec.error
    assert isinstance(err, blazen.ConnectionError), repr(err)
    assert f"http://user:***@127.0.0.1:{closed_port}" in err.message, err.message
    _assert_nothing_shows(err, caplog.text)
    assert "retrying" in caplog.text  # the retry was logged, and masked


def test_credentials_in_base_url_that_the_server_echoes_are_masked(caplog):
    """requests sends them as Basic auth; a server quoting that header back shows nothing."""
    caplog.set_level(logging.DEBUG)
    echo = Reply.json({"error": {"message": f"bad credentials Basic {TOKEN}"}}, status=401)
    with StreamServer([echo]) as server:
        base = server.base_url.replace("http://", f"http://user:{PASSWORD}@")
        model = blazen.Providers.openai_compat("test", base, max_retries=0)
        rec = Recorder()
        Streaming.complete(model, REQ, rec.handler)
    assert isinstance(rec.error, blazen.AuthError), repr(rec.error)
    _assert_nothing_shows(rec.error, caplog.text)


@pytest.mark.parametrize(
    "base_url",
    [
        f"http://user:{PASSWORD}@127.0.0.1:99999/v1",
        f"http://user:{PASSWORD}@127.0.0.1:port/v1",
        f"http://user:{PASSWORD}@[::1/v1",
        f"ftp://user:{PASSWORD}@127.0.0.1/v1",
    ],
    ids=["port-too-big", "port-not-a-number", "bad-ipv6", "ftp"],
)
def test_a_base_url_that_cannot_be_used_is_refused_at_build_without_its_password(base_url):
    """Refused when the model is built, naming base_url, the password masked."""
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai_compat("test", base_url, api_key=KEY)
    err = caught.value
    assert "base_url" in err.message and "user:***@" in err.message, err.message
    assert PASSWORD not in everything_about(err)


# --- verify= ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/nonexistent/ca.pem", "/nonexistent/certs/", "~/no-such-ca-bundle.pem"]
)
def test_verify_naming_a_path_that_does_not_exist_is_refused_when_the_model_is_built(path):
    """A ValidationError naming the path and what to pass instead, before anything is sent."""
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai_compat("test", "https://127.0.0.1:9/v1", verify=path)
    message = caught.value.message
    assert path in message and "does not exist" in message and "CA bundle" in message, message


def test_verify_naming_a_file_that_holds_no_certificate_is_refused_when_the_model_is_built(
    tmp_path,
):
    not_a_bundle = tmp_path / "ca.pem"
    not_a_bundle.write_text("this is not a certificate\n")
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai_compat("test", "https://127.0.0.1:9/v1", verify=str(not_a_bundle))
    assert str(not_a_bundle) in caught.value.message and "PEM" in caught.value.message


def test_an_empty_verify_path_is_refused_rather_than_turning_verification_off():
    """verify="" (an unset variable) is falsy to requests, which would not verify at all."""
    with pytest.raises(blazen.ValidationError) as caught:
        blazen.Providers.openai_compat("test", "https://127.0.0.1:9/v1", verify="")
    assert "verify" in caught.value.message


def test_a_ca_directory_is_accepted(tmp_path):
    """verify= may name a directory of hashed CA certificates, as requests allows."""
    model = blazen.Providers.openai_compat("test", "https://127.0.0.1:9/v1", verify=str(tmp_path))
    assert model.options.verify == str(tmp_path)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_ca_bundle_removed_after_the_model_was_built_is_a_validation_error_not_retried(
    tmp_path,
):
    """Not "the connection broke" retried twice: the path is named, nothing is sent."""
    bundle = tmp_path / "ca.pem"
    key = tmp_path / "key.pem"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        [*openssl, "-subj", "/CN=x", "-keyout", str(key), "-out", str(bundle)],
        check=True,
        capture_output=True,
    )
    model = blazen.Providers.openai_compat(
        "test", "https://127.0.0.1:9/v1", verify=str(bundle), max_retries=2
    )
    bundle.unlink()
    rec = Recorder()
    start = time.monotonic()
    Streaming.complete(model, REQ, rec.handler)
    took = time.monotonic() - start
    err = rec.error
    assert isinstance(err, blazen.ValidationError), repr(err)
    assert str(bundle) in err.message and "verify=" in err.message, err.message
    assert took < 0.4, took  # no retry backoff

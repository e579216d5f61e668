"""TLS verification stays on unless the user turns it off explicitly."""

from __future__ import annotations

import shutil
import ssl

import pytest

import blazen
from blazen import Streaming
from blazen.testing import Recorder, StreamServer

from .conftest import KEY_FOR_TESTS, sse_reply

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


@pytest.fixture
def cert(tls_cert):
    return tls_cert


@pytest.fixture
def tls_server(cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*map(str, cert))
    with StreamServer(ssl_context=ctx) as srv:
        yield srv


def test_a_self_signed_certificate_is_refused_by_default(tls_server, req):
    """verify=True (the default): an untrusted certificate is a ConnectionError, no retry."""
    model = blazen.Providers.openai(api_key=KEY_FOR_TESTS, base_url=tls_server.base_url)
    tls_server.add(sse_reply("text.sse"))
    rec = Recorder()
    Streaming.complete(model, req, rec.handler)
    assert isinstance(rec.error, blazen.ConnectionError) and "TLS" in rec.error.message
    assert tls_server.requests == []


def test_a_ca_bundle_or_an_explicit_opt_out_is_accepted(tls_server, cert, req):
    """verify=<CA bundle> trusts that CA; verify=False must be asked for by name."""
    tls_server.add(sse_reply("text.sse"), sse_reply("text.sse"))
    for verify in (str(cert[0]), False):
        model = blazen.Providers.openai(
            api_key=KEY_FOR_TESTS, base_url=tls_server.base_url, verify=verify
        )
        if verify is False:
            with pytest.warns(Warning):  # urllib3 warns about unverified HTTPS
                resp = Streaming.complete(model, req)
        else:
            resp = Streaming.complete(model, req)
        assert resp.content == "Why did the scarecrow win an award?"

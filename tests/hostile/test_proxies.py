"""TLS settings: a ``verify=`` path that cannot be a CA bundle is refused before anything is sent.

requests reads ``verify=`` on every connection: a path that does not exist failed each one as
if the network had ("the connection broke", retried twice), and ``""`` turned verification off.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

import blazen
from blazen import Llm, Streaming
from blazen.testing import Recorder

REQ = Llm.completion_request([Llm.user("hi")])


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

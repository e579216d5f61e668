"""The one mapping from requests/urllib3 exceptions to blazen errors."""

from __future__ import annotations

import requests

import blazen
from blazen._http.exceptions import EXCEPTIONS as _EXCEPTIONS
from blazen._http.exceptions import map_exception


def all_subclasses(cls):
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= all_subclasses(sub)
    return out


def test_every_requests_exception_is_mapped_explicitly():
    """A new upstream exception class fails this test until it is added to the table."""
    listed = {cls for cls, _ in _EXCEPTIONS}
    for exc_cls in all_subclasses(requests.exceptions.RequestException):
        if exc_cls.__module__.startswith("requests"):
            assert any(
                issubclass(exc_cls, c) and c is not requests.exceptions.RequestException
                for c in listed
            ), exc_cls


def test_mapped_errors_are_typed_and_keep_the_cause():
    """Each mapping gives a blazen error with the original as __cause__."""
    cases = {
        requests.exceptions.ConnectTimeout("x"): blazen.TimeoutError,
        requests.exceptions.ReadTimeout("x"): blazen.TimeoutError,
        requests.exceptions.ConnectionError("refused"): blazen.ConnectionError,
        requests.exceptions.ChunkedEncodingError("broken"): blazen.ConnectionError,
        requests.exceptions.SSLError("bad cert"): blazen.ConnectionError,
        requests.exceptions.InvalidURL("bad"): blazen.ValidationError,
        ConnectionResetError("reset"): blazen.ConnectionError,
    }
    for exc, cls in cases.items():
        err = map_exception(
            exc, provider="p", url="http://x", connect_timeout=1.0, read_timeout=2.0
        )
        assert type(err) is cls, exc
        assert err.__cause__ is exc


def test_an_unknown_exception_is_an_internal_error():
    err = map_exception(
        ZeroDivisionError("?"), provider="p", url="u", connect_timeout=1.0, read_timeout=1.0
    )
    assert isinstance(err, blazen.InternalError)


def test_an_abort_after_detach_leaves_a_pooled_socket_alone():
    """Once a connection goes back to the pool, a late abort of its old stream cannot kill it."""
    import socket
    import types

    from blazen._http import Abort

    a, b = socket.socketpair()
    try:
        abort = Abort()
        abort.attach(types.SimpleNamespace(sock=a))
        assert abort.detach() is True
        abort.abort()
        a.sendall(b"still alive")
        assert b.recv(64) == b"still alive"
        # Without detach the same abort shuts the socket down.
        abort2 = Abort()
        abort2.attach(types.SimpleNamespace(sock=a))
        abort2.abort()
        assert b.recv(64) == b""
        assert abort2.detach() is False
    finally:
        a.close()
        b.close()

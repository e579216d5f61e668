"""The one mapping from requests/urllib3 exceptions to blazen errors."""

from __future__ import annotations

import http.client
import inspect
import socket
import ssl

import pytest
import requests
import urllib3.exceptions

import blazen
from blazen._http.exceptions import CATCH_ALL, EXCEPTIONS, map_exception


def all_subclasses(cls):
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= all_subclasses(sub)
    return out


def _raised_by(module):
    """Every exception class a module of the HTTP stack defines (warnings are not raised)."""
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and not issubclass(obj, Warning)
        and not obj.__name__.startswith("_")
    ]


@pytest.mark.parametrize(
    "module",
    [requests.exceptions, urllib3.exceptions, http.client, ssl, socket],
    ids=lambda m: m.__name__,
)
def test_every_exception_of_the_http_stack_is_placed_by_name(module):
    """A new upstream exception class fails this test until the table says what it means.

    The broad bases (RequestException, urllib3's HTTPError, HTTPException, OSError) come
    last in the table; a class that only they catch has not been placed.
    """
    for exc_cls in _raised_by(module):
        if exc_cls in CATCH_ALL or not issubclass(exc_cls, (*CATCH_ALL,)):
            continue
        first = next(base for base, _ in EXCEPTIONS if issubclass(exc_cls, base))
        assert first not in CATCH_ALL, f"{exc_cls.__module__}.{exc_cls.__qualname__}"


@pytest.mark.parametrize(
    "exc_cls",
    sorted(
        {
            cls
            for mod in (requests.exceptions, urllib3.exceptions, http.client, ssl, socket)
            for cls in _raised_by(mod)
            if issubclass(cls, (*CATCH_ALL,))
        },
        key=lambda c: (c.__module__, c.__qualname__),
    ),
    ids=lambda c: f"{c.__module__}.{c.__qualname__}",
)
def test_each_mapped_exception_becomes_a_typed_blazen_error_with_its_cause(exc_cls):
    """Whatever the HTTP stack raises ends as a blazen error naming the provider."""
    try:
        exc = exc_cls.__new__(exc_cls)
        BaseException.__init__(exc, "boom")
    except TypeError:
        pytest.skip("cannot be built without its arguments")
    err = map_exception(exc, provider="p", url="http://x", connect_timeout=1.0, read_timeout=2.0)
    assert isinstance(err, blazen.BlazenError) and err.__cause__ is exc
    what = next(what for base, what in EXCEPTIONS if issubclass(exc_cls, base))
    assert isinstance(err, blazen.InternalError) is (what == "internal"), what


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

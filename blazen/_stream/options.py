"""``ModelOptions``: what every provider accepts besides its key, model and URL."""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Mapping
from typing import Any, Optional, Union

import attrs

from .._http import DEFAULT_MAX_EVENT_BYTES
from .._types import by_value, immutable
from ..errors import ValidationError

__all__ = ["ModelOptions"]


def _timeout(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"{name} must be a number of seconds or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not value > 0 or math.isinf(value):
        msg = f"{name} must be a positive, finite number of seconds (or None), got {value}"
        raise ValueError(msg)
    return float(value)


def _check_header(name: str, value: str) -> None:
    # Extra headers often carry a credential: a bad one is refused by name, never shown.
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) or value != value.strip():
        msg = (
            f"the value of header {name!r} has surrounding whitespace or a control character "
            "(a newline from a file?); strip it"
        )
        raise ValidationError(msg)
    # Checked without an except block, which would chain the encode error (and the value).
    if not all(ord(ch) < 256 for ch in value):
        msg = f"the value of header {name!r} has a character an HTTP header cannot carry"
        raise ValidationError(msg)


def _check_verify(path: str) -> None:
    """Refuse a ``verify=`` path that cannot be a CA bundle, before anything is sent.

    requests reads it on every connection and would fail each one as if the network had;
    and it takes ``""`` for False, turning verification off without a word.
    """
    if not path:
        msg = (
            'verify="" names no CA bundle (an unset variable?); pass the path of a CA bundle, '
            "True for the default CAs, or False to turn verification off"
        )
        raise ValidationError(msg)
    if not os.path.exists(path):
        tilde = " (~ is not expanded: pass the full path)" if path.startswith("~") else ""
        msg = (
            f"verify={path!r}: that file or directory does not exist{tilde}; pass the path "
            "of a CA bundle (a PEM file) or of a directory of CA certificates, or True for "
            "the default CAs"
        )
        raise ValidationError(msg)
    if os.path.isdir(path):
        return  # a directory of hashed certificates (c_rehash), as requests allows
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except OSError as exc:  # ssl.SSLError is one
        reason = exc.strerror or str(exc)
    else:
        return
    # Raised outside the except block: nothing is chained to it.
    msg = (
        f"verify={path!r} cannot be used as a CA bundle ({reason}); it must be a PEM file "
        "of CA certificates (-----BEGIN CERTIFICATE-----), or a directory of them"
    )
    raise ValidationError(msg)


@immutable
@by_value
@attrs.frozen(kw_only=True, init=False, repr=False, eq=False)
class ModelOptions:
    """Options every provider accepts (``Providers.<name>(..., **options)``).

    - ``max_retries`` (2): attempts after the first, only before any chunk is delivered.
    - ``connect_timeout`` (10 s), ``idle_timeout`` (300 s without a content event),
      ``timeout`` (None: no total limit unless given per call).
    - ``headers``: extra HTTP headers. ``verify``: TLS verification, or the path of a CA
      bundle (or a directory of CA certificates), checked when the options are built.
    - ``max_connections`` (32): connections one model uses at once (more callers wait for
      a free one) and keeps pooled.
    - ``max_event_bytes`` (8 MiB): the largest single event accepted.
    - ``retry_after_cap`` (60 s): a longer ``Retry-After`` is not waited for.
    - ``max_continuations`` (5): how many times one stream continues a turn the provider
      paused (Anthropic ``pause_turn``) before it reports ``"paused"``; a request's own
      ``max_continuations`` may lower it, 0 turns continuing off.
    """

    max_retries: int
    connect_timeout: Optional[float]
    idle_timeout: Optional[float]
    timeout: Optional[float]
    headers: Mapping[str, str]
    verify: Union[bool, str]
    max_connections: int
    max_event_bytes: int
    retry_after_cap: float
    max_continuations: int

    def __init__(
        self,
        *,
        max_retries: int = 2,
        connect_timeout: Optional[float] = 10.0,
        idle_timeout: Optional[float] = 300.0,
        timeout: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
        verify: Union[bool, str] = True,
        max_connections: int = 32,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        retry_after_cap: float = 60.0,
        max_continuations: int = 5,
    ) -> None:
        values = dict(locals())
        del values["self"]
        for name in ("connect_timeout", "idle_timeout", "timeout", "retry_after_cap"):
            values[name] = _timeout(name, values[name])
        for name, low in (
            ("max_retries", 0),
            ("max_connections", 1),
            ("max_event_bytes", 1024),
            ("max_continuations", 0),
        ):
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                msg = f"{name} must be an int of at least {low}, got {value!r}"
                raise ValueError(msg)
        headers = {} if headers is None else headers
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            msg = "headers must be a mapping of str to str"
            raise TypeError(msg)
        for name, value in headers.items():
            _check_header(name, value)
        values["headers"] = dict(headers)
        if not isinstance(verify, (bool, str)):
            msg = "verify must be True, False or the path of a CA bundle"
            raise TypeError(msg)
        if isinstance(verify, str):
            _check_verify(verify)
        self.__attrs_init__(**values)

    def __repr__(self) -> str:
        # Extra headers often carry a credential (a gateway key): name them, never show them.
        shown = {a.name: getattr(self, a.name) for a in attrs.fields(ModelOptions)}
        shown["headers"] = {name: "***" for name in self.headers}
        return "ModelOptions(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @classmethod
    def from_kwargs(cls, provider: str, options: Mapping[str, Any]) -> ModelOptions:
        """Build options, naming any option that does not exist."""
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            msg = (
                f"unknown option(s) for Providers.{provider}: {', '.join(unknown)}; "
                f"known options: {', '.join(sorted(known))}"
            )
            raise TypeError(msg)
        return cls(**options)

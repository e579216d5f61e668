"""URLs that carry a password, and the proxy a model's requests go through.

A URL may carry ``user:password@``: a gateway behind Basic auth at ``base_url``, or a proxy
that asks for credentials (``HTTPS_PROXY=http://user:password@host:3128``). The password
must show nowhere: :func:`shown_url` masks it for messages and ``repr``, and
:func:`url_masks` lists every form in which it could surface elsewhere (a library's message
quoting the URL, the ``Basic`` token requests sends, a server or proxy echoing that back).

The proxy is read from the environment once, when the model is built (:func:`environ_proxy`),
and checked the way requests and urllib3 would read it: a setting they could not use is a
:class:`~blazen.ValidationError` then, naming the variable, not an error blaming
``base_url`` on the first request.
"""

from __future__ import annotations

import base64
import os
from typing import Optional
from urllib.parse import unquote, urlsplit

import attrs
import requests.utils
import urllib3.util

from .._types.frozen import by_value
from ..errors import ValidationError

__all__ = ["Proxy", "environ_proxy", "shown_url", "url_masks"]

#: A password shorter than this is masked only where it stands in its URL: masking a short
#: word everywhere would rewrite honest text.
_MIN_BARE_SECRET = 8


def _split_userinfo(url: str) -> Optional[tuple[str, str, str]]:
    """``(before, userinfo, after)`` around ``userinfo@`` in the authority, if there is one.

    The authority ends at the first ``/``, ``?`` or ``#`` (RFC 3986, as urllib3 and
    urllib parse it); its userinfo ends at its last ``@``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not at:
        return None
    return scheme + sep, userinfo, host + rest[end:]


def shown_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` masked (a lone user too).

    A lone user is masked as well: services put a token there (``https://<token>@host``).
    """
    parts = _split_userinfo(url)
    if parts is None:
        return url
    before, userinfo, after = parts
    user, colon, _ = userinfo.partition(":")
    return f"{before}{user + ':***' if colon else '***'}@{after}"


def url_masks(url: str) -> tuple[tuple[str, str], ...]:
    """``(secret, replacement)`` pairs that hide the password of ``url`` in any text.

    The ``user:password@`` text as the URL spells it, always; the password alone (as
    written and percent-decoded) and the ``Basic`` token requests builds from it, when they
    are long enough not to be ordinary words. Longest first, so the first mask applies.
    """
    parts = _split_userinfo(url)
    if parts is None:
        return ()
    _, userinfo, _ = parts
    user, colon, password = userinfo.partition(":")
    secret = password if colon else user
    masks = [(userinfo + "@", (user + ":***@") if colon else "***@")]
    token_text = f"{unquote(user)}:{unquote(password)}"
    try:
        token = base64.b64encode(token_text.encode("latin-1")).decode()
    except UnicodeEncodeError:
        token = base64.b64encode(token_text.encode("utf-8")).decode()
    for bare in (secret, unquote(secret), token):
        if len(bare) >= _MIN_BARE_SECRET and bare not in (s for s, _ in masks):
            masks.append((bare, "***"))
    return tuple(masks)


@by_value
@attrs.frozen(repr=False, eq=False)
class Proxy:
    """The proxy a model's requests go through, and the variable that set it."""

    #: The proxy's URL as requests uses it (``http://`` added when it had no scheme).
    url: str
    #: The environment variable it came from (``HTTPS_PROXY``, ``all_proxy``...).
    variable: str

    def __str__(self) -> str:
        return f"{shown_url(self.url)} (from {self.variable})"

    def __repr__(self) -> str:
        return f"Proxy({shown_url(self.url)!r}, variable={self.variable!r})"


def environ_proxy(url: str) -> tuple[dict[str, str], Optional[Proxy]]:
    """The proxy settings for ``url`` from the environment, and the proxy it will use.

    The first is what requests is handed on every send (empty when ``NO_PROXY`` names the
    host). Raises :class:`~blazen.ValidationError` when the proxy for ``url`` is one that
    requests could not use, naming the variable with the password masked.
    """
    proxies: dict[str, str] = requests.utils.get_environ_proxies(url)
    if not proxies:
        return {}, None
    parts = urlsplit(url)
    host = parts.hostname
    keys = [parts.scheme, "all"]
    if host:
        keys = [f"{parts.scheme}://{host}", parts.scheme, f"all://{host}", "all"]
    key = next((k for k in keys if k in proxies), None)
    if key is None:
        return proxies, None
    variable = _variable(key)
    fixed = _check_proxy(proxies[key], variable)
    # requests reads the same map; hand it the URL exactly as checked.
    proxies[key] = fixed
    return proxies, Proxy(url=fixed, variable=variable)


def _variable(key: str) -> str:
    # urllib reads *_proxy case-insensitively and the lower-case spelling wins.
    wanted = f"{key}_proxy"
    names = [name for name in os.environ if name.lower() == wanted]
    return wanted if wanted in names else (names[0] if names else wanted.upper())


def _check_proxy(raw: str, variable: str) -> str:
    """``raw`` as requests will use it; ``ValidationError`` if requests could not."""
    shown = shown_url(raw)
    what = None
    try:
        # requests adds http:// to a bare host:port, then urllib3 parses it.
        fixed: str = requests.utils.prepend_scheme_if_needed(raw, "http")  # type: ignore[no-untyped-call]
        parsed = urllib3.util.parse_url(fixed)
    except ValueError:  # urllib3's LocationParseError is one
        what = "is not a URL that can be parsed (a bad port or host?)"
    else:
        scheme = (parsed.scheme or "").lower()
        if scheme.startswith("socks"):
            what = (
                "is a SOCKS proxy, which blazen does not support; use an HTTP proxy, or "
                "name the host in NO_PROXY"
            )
        elif scheme not in ("http", "https"):
            what = "does not start with http:// or https://"
        elif not parsed.host:
            what = "names no host"
    if what is not None:
        # No exception chained: a parser's message may quote the URL, password and all.
        msg = (
            f"the proxy set in {variable} ({shown}) {what}; fix or unset {variable} "
            "(a proxy URL looks like http://user:password@host:3128)"
        )
        raise ValidationError(msg)
    return fixed

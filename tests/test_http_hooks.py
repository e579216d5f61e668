"""The private names of urllib3 and http.client blazen relies on exist in the installed versions.

``blazen._http.hooks`` names every one of them in ``HOOKS``; each is looked up here on the
class or module, or on a live instance for attributes only instances have (a connection, a
pool manager, a response read from a real socket). The walk also checks that the rest of
``blazen._http`` reaches no private name of those libraries outside that module.
"""

from __future__ import annotations

import ast
import http.client
import importlib
from pathlib import Path

import pytest
import urllib3
from urllib3._collections import RecentlyUsedContainer

import blazen
from blazen import Llm
from blazen._http import Abort, HttpRequest, Transport
from blazen._http.hooks import HOOKS, http_response, raw_read1, response_socket
from blazen.testing import Reply, StreamServer, openai_sse

HTTP_DIR = Path(blazen.__file__).parent / "_http"


def _owner(path: str) -> object:
    module, _, name = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), name)


def _instances() -> dict[str, object]:
    """Live instances of every class whose hooks live on instances."""
    conn = urllib3.connection.HTTPConnection("localhost", 1)
    manager = urllib3.PoolManager()
    with StreamServer([Reply.sse(openai_sse(["hi"]))]) as server:
        transport = Transport(max_connections=1, verify=True, url=server.url)
        resp = transport.open(
            HttpRequest.post_json(server.url + "/chat/completions", {}, {"x": 1}, sse=True),
            Abort(),
            provider="p",
            stream=True,
            connect_timeout=5,
            read_timeout=5,
        )
        raw = resp._resp.raw
        found = {
            "urllib3.connection.HTTPConnection": conn,
            "http.client.HTTPConnection": conn,
            "urllib3.poolmanager.PoolManager": manager,
            "urllib3._collections.RecentlyUsedContainer": RecentlyUsedContainer(),
            "urllib3.response.HTTPResponse": raw,
            "http.client.HTTPResponse": http_response(raw),
        }
        # The accessors built on them give what they promise on a live response.
        assert isinstance(http_response(raw), http.client.HTTPResponse)
        assert response_socket(raw) is not None and callable(raw_read1(raw))
        resp.close()
        transport.close()
    return found


@pytest.fixture(scope="module")
def instances() -> dict[str, object]:
    return _instances()


@pytest.mark.parametrize("hook", HOOKS, ids=repr)
def test_every_private_name_blazen_relies_on_exists_in_the_installed_version(hook, instances):
    """A urllib3 or Python release that drops or renames one fails here, not in a stream."""
    if hook.instance:
        holder = instances[hook.owner]
        assert isinstance(holder, _owner(hook.owner))
    else:
        holder = _owner(hook.owner)
    assert hasattr(holder, hook.name), f"{hook!r} is gone ({hook.why})"


def _private_uses(path: Path) -> list[str]:
    # Attribute reads and overrides of an underscore name that is not blazen's own: the
    # names a module may take from its own objects are the ones defined in it.
    tree = ast.parse(path.read_text())
    own = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    }
    targets = [
        t
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    targets += [e for t in targets if isinstance(t, ast.Tuple) for e in t.elts]
    own |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
    slots = {
        elt.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
        for elt in getattr(node.value, "elts", ())
        if isinstance(elt, ast.Constant)
    }
    own |= slots
    return sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            # zlib's private type names a decompressor in an annotation: not the HTTP stack.
            and not (isinstance(node.value, ast.Name) and node.value.id == "zlib")
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
        }
    )


def test_only_the_hooks_module_reaches_into_the_http_stack():
    """Outside hooks.py, blazen._http reads no underscore name it did not define itself."""
    wrong = {
        path.name: uses
        for path in sorted(HTTP_DIR.glob("*.py"))
        if path.name != "hooks.py" and (uses := _private_uses(path))
    }
    assert wrong == {}
    # The walk sees what it judges: hooks.py itself reaches several.
    assert {"_fp", "_dns_host", "_tunnel_host"} <= set(_private_uses(HTTP_DIR / "hooks.py"))


def test_a_stream_works_through_the_hooks():
    """The hooks in use: one real stream through them gives its text."""
    with StreamServer([Reply.sse(openai_sse(["a", "b"]))]) as server:
        model = blazen.Providers.openai_compat("t", server.url, api_key="k" * 10)
        resp = blazen.Streaming.complete(model, Llm.completion_request([Llm.user("hi")]))
        assert resp is not None and resp.content == "ab"

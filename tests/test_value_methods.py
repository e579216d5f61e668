"""blazen's values compare, hash and show themselves exactly as attrs would generate it.

The value classes are declared ``eq=False, repr=False`` and get their methods from
``by_value`` (attrs compiles its own afresh at every import, a third of blazen's import
time). Here each is held against an attrs class made from the same fields with attrs'
own methods: on every pair of sample values, equality, hashing and repr agree.
"""

from __future__ import annotations

import itertools
from array import array
from typing import Any

import attrs
import pytest

import blazen
from blazen import Llm
from blazen._http.request import HttpRequest
from blazen._http.urls import Proxy
from blazen._stream.options import ModelOptions

_NAN = float("nan")

SAMPLES: list[Any] = [
    Llm.user("hi"),
    Llm.user("hi"),
    Llm.user("ho"),
    Llm.assistant("hi"),
    Llm.system("be brief"),
    Llm.completion_request([Llm.user("hi")], max_tokens=5),
    Llm.completion_request([Llm.user("hi")], max_tokens=5),
    Llm.completion_request([Llm.user("hi")], max_tokens=6, temperature=0.5),
    blazen.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    blazen.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    blazen.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3, provider="x"),
    blazen.StreamChunk(content_delta="a"),
    blazen.StreamChunk(content_delta="a"),
    blazen.StreamChunk(reasoning_delta="a", is_final=True),
    blazen.CompletionResponse(content="a", finish_reason="stop"),
    blazen.CompletionResponse(content="a", finish_reason="stop", provider="openai"),
    blazen.CompletionResponse(content="b", finish_reason="length"),
    blazen.TextPart(text="a"),
    blazen.TextPart(text="b"),
    blazen.ReasoningPart(text="t", signature="s"),
    blazen.ReasoningPart(text="t"),
    blazen.Citation(provider="anthropic", kind="char_location", cited_text="x", raw={"a": 1}),
    blazen.Citation(provider="anthropic", kind="char_location", cited_text="x", raw={"a": 2}),
    blazen.StopDetails(provider="anthropic", category="cyber"),
    blazen.StopDetails(provider="anthropic", category="bio"),
    blazen.ProviderItem(provider="openai", kind="reasoning", data={"id": "r"}),
    blazen.ProviderItem(provider="openai", kind="reasoning", data={"id": "r"}),
    blazen.ServerTool(name="web_search_20250305", config={"max_uses": 2}),
    blazen.ServerToolEvent(provider="anthropic", name="web_search", status="running", id="s"),
    blazen.ServerToolEvent(provider="anthropic", name="web_search", status="done", id="s"),
    blazen.ToolCall("c1", "f", '{"a": 1}'),
    blazen.ToolCall("c1", "f", '{"a": 1}'),
    blazen.ToolCall("c1", "f", '{"a": 2}'),
    Llm.tool("lookup", "Looks up.", {"type": "object", "properties": {}}),
    Llm.tool("lookup", "Looks up.", {"type": "object", "properties": {}}),
    blazen.ChunkEvent(blazen.StreamChunk(content_delta="a")),
    blazen.ChunkEvent(_NAN),
    blazen.ChunkEvent(_NAN),
    blazen.DoneEvent("stop", None, blazen.CompletionResponse(content="a")),
    blazen.ErrorEvent(blazen.TimeoutError("slow", limit="idle", seconds=1.0)),
    blazen.EmbeddingResponse(vectors=(array("f", [1.0, 2.0]),)),
    blazen.EmbeddingResponse(vectors=(array("f", [1.0, 2.0]),), model="m"),
    HttpRequest(method="POST", url="http://x/v1", headers={"a": "b"}, body=b"{}"),
    HttpRequest(method="POST", url="http://x/v1", headers={"a": "c"}, body=b"{}"),
    Proxy(url="http://proxy:3128", variable="HTTPS_PROXY"),
    Proxy(url="http://proxy:3128", variable="HTTPS_PROXY"),
    ModelOptions(),
    ModelOptions(timeout=5.0),
]


def _reference(cls: type) -> type:
    """An attrs class with ``cls``'s fields and attrs' own eq, hash and repr."""
    these = {
        f.name: attrs.field(
            eq=getattr(f, "eq_key", None) or f.eq, repr=f.repr, hash=f.hash, alias=f.alias
        )
        for f in attrs.fields(cls)
    }
    return attrs.make_class(cls.__name__, these, frozen=True, kw_only=True)


def _hash(value: Any) -> Any:
    try:
        return hash(value)
    except TypeError:
        return None


def _as_reference(value: Any, ref: type) -> Any:
    return ref(**{f.alias: getattr(value, f.name) for f in attrs.fields(type(value))})


@pytest.mark.parametrize(
    "cls", sorted({type(v) for v in SAMPLES}, key=lambda c: c.__name__), ids=lambda c: c.__name__
)
def test_eq_hash_and_repr_agree_with_what_attrs_generates(cls: type) -> None:
    ref = _reference(cls)
    mine = [v for v in SAMPLES if type(v) is cls]
    theirs = [_as_reference(v, ref) for v in mine]
    for a, b in itertools.product(range(len(mine)), repeat=2):
        assert (mine[a] == mine[b]) == (theirs[a] == theirs[b])
        assert (mine[a] != mine[b]) == (theirs[a] != theirs[b])
        # Unhashable where attrs' is (a dict or an array inside), else equal values hash equal.
        assert (_hash(mine[a]) is None) == (_hash(theirs[a]) is None)
        if mine[a] == mine[b] and _hash(mine[a]) is not None:
            assert hash(mine[a]) == hash(mine[b])
    if "__repr__" not in vars(cls) or cls.__repr__.__qualname__.startswith("by_value"):
        for value, twin in zip(mine, theirs):
            assert repr(value) == repr(twin)
    assert mine[0].__eq__(object()) is NotImplemented


def test_every_value_class_of_the_core_is_covered() -> None:
    """A value class declared with ``by_value`` that no sample here exercises fails this."""
    covered = {type(v) for v in SAMPLES}
    import blazen._types as types_pkg

    declared = {
        v
        for name in types_pkg.__all__
        if isinstance(v := getattr(types_pkg, name), type)
        and attrs.has(v)
        and v.__eq__.__qualname__.startswith("by_value")
    }
    missing = {c.__name__ for c in declared - covered}
    # Media parts need files or URLs to build; their fields are checked like TextPart's.
    assert missing <= {"ImagePart", "DocumentPart", "AudioPart", "VideoPart"}, missing


def test_equality_goes_field_by_field_as_attrs_does() -> None:
    """NaN is not equal to itself, and what a field's ``==`` returned is handed back."""
    nan = float("nan")
    assert blazen.ChunkEvent(nan) != blazen.ChunkEvent(nan)  # type: ignore[arg-type]

    class Odd:
        def __eq__(self, other: object) -> Any:
            return "truthy"

    odd = blazen.ChunkEvent(Odd())  # type: ignore[arg-type]
    assert (odd == blazen.ChunkEvent(Odd())) == "truthy"  # type: ignore[arg-type]
    ref = _reference(blazen.ChunkEvent)
    assert (ref(chunk=nan) == ref(chunk=nan)) is False


def test_a_repr_that_reaches_itself_stops() -> None:
    loop: list[Any] = []
    event = blazen.ChunkEvent(loop)  # type: ignore[arg-type]
    loop.append(event)
    assert repr(event) == "ChunkEvent(chunk=[...])"

"""The shortcuts blazen takes per streamed event give exactly what the plain code gives."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blazen
from blazen._kit import StreamState, parse_json
from blazen._types import ArgumentFragments, stream_chunk, tool_call_snapshot, tool_calls_view


def test_the_hot_path_chunk_builder_makes_the_same_value_as_the_constructor():
    """Streamed chunks are built without the keyword __init__; the values are identical."""
    calls = (blazen.ToolCall("call_1", "f", '{"a": 1}'),)
    fast = stream_chunk("hi", "hmm", calls)
    slow = blazen.StreamChunk(content_delta="hi", reasoning_delta="hmm", tool_calls=calls)
    assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    refused = stream_chunk(None, None, calls, "I can't.")
    assert refused == blazen.StreamChunk(tool_calls=calls, refusal_delta="I can't.")
    assert repr(refused) == repr(blazen.StreamChunk(tool_calls=calls, refusal_delta="I can't."))
    with pytest.raises(AttributeError, match="immutable"):
        fast.content_delta = "x"  # type: ignore[misc]


def test_the_hot_path_tool_call_builder_makes_the_same_value_as_the_constructor():
    """Snapshots of streamed calls skip the validating __init__; the values are identical."""
    parts = ['{"a"', ": 1}", " ignored"]
    fast = tool_call_snapshot("call_1", "f", ArgumentFragments(parts, 2))
    slow = blazen.ToolCall("call_1", "f", '{"a": 1}')
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert fast.arguments() == {"a": 1}
    assert [f.name for f in attrs.fields(blazen.ToolCall)] == ["id", "name", "_args", "caller"]
    caller = {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}
    called = tool_call_snapshot("call_1", "f", ArgumentFragments(parts, 2), dict(caller))
    made = blazen.ToolCall("call_1", "f", '{"a": 1}', caller=caller)
    assert called == made and hash(called) == hash(made) and repr(called) == repr(made)
    assert called != fast
    with pytest.raises(AttributeError, match="immutable"):
        fast.name = "g"  # type: ignore[misc]


def test_the_hot_path_tool_calls_view_behaves_as_the_tuple_of_its_calls():
    """A shared-storage snapshot equals, hashes and prints as the plain tuple of its calls."""
    calls = [blazen.ToolCall(f"c{i}", "f", "{}") for i in range(5)]
    view = tool_calls_view(calls, 3, tuple(calls[3:]))
    calls.append(blazen.ToolCall("c5", "g", "{}"))  # later growth of the shared list
    plain = tuple(calls[:5])
    assert view == plain and plain == view and hash(view) == hash(plain)
    assert repr(view) == repr(plain) and list(view) == list(plain) and len(view) == 5
    assert view[-1] is calls[4] and view[1:4] == plain[1:4] and view != plain[:4]
    assert blazen.ToolCalls(calls, 3, tuple(calls[3:5])) == view
    with pytest.raises(IndexError):
        view[5]
    with pytest.raises(AttributeError, match="immutable"):
        view._n = 6  # type: ignore[misc]
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(view)) == plain and copy.deepcopy(view) == plain


@pytest.mark.parametrize(
    "data",
    [
        '{"a": 1}',
        ' {"a": [1, 2.5, "x\\u00e9"]} ',
        '{"a": 1}\n',
        '{"nested": {"b": null, "c": true}}',
    ],
)
def test_parse_json_decodes_what_json_loads_decodes(data):
    """Payloads with or without surrounding whitespace decode as json.loads decodes them."""
    assert parse_json("p", data) == json.loads(data)


@pytest.mark.parametrize(
    "data", ['{"a": 1} x', '{"a": 1}{"b": 2}', "{'a': 1}", "", "nope", "[1]", "3"]
)
def test_parse_json_rejects_what_is_not_one_json_object(data):
    """Trailing data, invalid JSON and non-objects are malformed payloads, never raw errors."""
    with pytest.raises(blazen.ProviderError, match="cannot read"):
        parse_json("p", data)


def test_text_kept_in_blocks_reads_back_whole():
    """Text streamed in many deltas (more than one block of them) reads back in order."""
    state = StreamState()
    parts = [f"w{i} " for i in range(1000)]
    for p in parts:
        state.emit(p, "r")
    assert state.text == "".join(parts) and state.reasoning == "r" * 1000
    assert state.response().content == "".join(parts)


def test_every_snapshot_equals_one_rebuilt_from_all_fragments_so_far():
    """Snapshots reuse the ToolCall of calls a delta did not touch; each still shows all so far."""
    state = StreamState()
    seen: dict[int, list[str]] = {0: [], 1: [], 2: []}
    names = {0: "a", 1: "b", 2: "c"}
    for step in range(60):
        index = (step * 7) % 3
        piece = f"p{step},"
        seen[index].append(piece)
        state.tool_delta(index, f"id{index}", names[index], piece)
        chunk = state.emit(None, None)
        assert chunk is not None
        expected = [(f"id{i}", names[i], "".join(seen[i])) for i in sorted(seen) if seen[i]]
        got = [(c.id, c.name, c.arguments_json) for c in chunk.tool_calls]
        assert sorted(got) == sorted(expected)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["announce", "fragment", "text", "emit"]),
            st.integers(0, 11),
            st.text(max_size=3),
        ),
        max_size=80,
    )
)
def test_argument_delta_gives_what_tool_delta_then_emit_give(steps):
    """The tool-call shortcut (one fragment for a known call) against the general merge,
    over any mix of new calls, fragments for known and unknown calls, text and frozen
    calls thawed again (past eight calls): every chunk and the final answer agree."""
    fast, plain = StreamState(), StreamState()
    for op, index, piece in steps:
        if op == "announce":
            for state in (fast, plain):
                state.tool_delta(index, f"id{index}", f"f{index}", None)
            got, want = fast.emit(None, None), plain.emit(None, None)
        elif op == "fragment":
            got = fast.argument_delta(index, piece)
            plain.tool_delta(index, None, None, piece)
            want = plain.emit(None, None)
        elif op == "text":
            got, want = fast.emit(piece, None), plain.emit(piece, None)
        else:
            fast.tool_delta(index, None, None, piece)
            plain.tool_delta(index, None, None, piece)
            got, want = fast.emit(None, None), plain.emit(None, None)
        assert got == want
        if got is not None and want is not None:
            assert tuple(got.tool_calls) == tuple(want.tool_calls)
    assert fast.response() == plain.response()


def test_a_slot_builder_whose_layout_differs_from_its_class_fails_at_once():
    """The hot path's slot builders check at import that their instances can become the
    frozen class: a class with a slot the builder lacks (one inherited here) fails loudly."""
    from blazen._types.frozen import builder_class

    @attrs.frozen(weakref_slot=False)
    class Base:
        a: int

    @attrs.frozen(weakref_slot=False)
    class Child(Base):
        b: int

    with pytest.raises(TypeError, match="layout differs"):
        builder_class(Child)
    built = builder_class(Base)()
    built.a = 1
    built.__class__ = Base
    assert built == Base(1)

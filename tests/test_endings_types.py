"""The shared values of issue 27: citations, stop details, server tools, verbatim items, endings."""

from __future__ import annotations

import logging
import pickle
import re
from pathlib import Path

import pytest

import blazen
from blazen import Llm
from blazen._kit.finish import FINISH_REASONS, finish_reason_table, normalise_finish_reason
from blazen.sinks.codec import decode, encode_chunk


def build(provider: str, req: blazen.CompletionRequest) -> object:
    """What ``provider``'s wire format builds for ``req`` (raises what it refuses)."""
    factory = getattr(blazen.Providers, provider)
    return factory(api_key="k").wire.build(req, stream=True)


ROOT = Path(__file__).resolve().parent.parent


def test_citation_is_a_frozen_value_that_keeps_a_copy_of_the_raw_object():
    """A Citation cannot be changed, and changing the dict it was built from changes nothing."""
    raw = {"type": "char_location", "cited_text": "x", "document_index": 0}
    c = blazen.Citation(provider="anthropic", kind="char_location", cited_text="x", raw=raw)
    raw["cited_text"] = "changed"
    assert c.raw["cited_text"] == "x"
    with pytest.raises(AttributeError):
        c.url = "https://example.com"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(c)) == c


@pytest.mark.parametrize(
    ("field", "value"),
    [("cited_text", 5), ("source_index", "0"), ("text_start", True), ("provider", "")],
)
def test_citation_refuses_fields_of_the_wrong_type(field, value):
    """A number where text belongs (or a bool for an index) is refused when the value is built."""
    kwargs = {"provider": "gemini", "kind": "grounding", field: value}
    with pytest.raises((TypeError, ValueError)):
        blazen.Citation(**kwargs)


def test_server_tool_goes_in_tools_beside_function_tools_and_is_kept_apart():
    """Llm.server_tool values in tools= land in server_tools; function tools stay in tools."""
    search = Llm.server_tool("web_search", max_uses=3)
    fn = Llm.tool("get_time")
    req = Llm.completion_request([Llm.user("hi")], tools=[fn, search])
    assert req.tools == (fn,)
    assert req.server_tools == (search,)
    assert search.config == {"max_uses": 3} and not search.versioned
    assert Llm.server_tool("web_search_20250305").versioned
    # A pattern's $ would match before a final newline: that name is no exact type.
    assert not Llm.server_tool("web_search_20250305\n").versioned


def test_server_tool_config_must_be_json():
    """A config value JSON cannot carry is refused when the tool is built, not when sent."""
    with pytest.raises(TypeError):
        Llm.server_tool("web_search", user_location=object())


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_a_wire_without_server_tools_refuses_them_before_sending(provider):
    """OpenAI chat completions and Ollama have no provider-side tools: UnsupportedError."""
    req = Llm.completion_request([Llm.user("hi")], tools=[Llm.server_tool("web_search")])
    with pytest.raises(blazen.UnsupportedError, match="web_search"):
        build(provider, req)


def test_provider_items_ride_only_on_assistant_turns_and_through_message():
    """resp.message carries provider_items; a user turn with them is refused."""
    item = blazen.ProviderItem(provider="anthropic", kind="content", data=[{"type": "text"}])
    resp = blazen.CompletionResponse(content="hi", provider_items=(item,))
    assert resp.message.provider_items == (item,)
    with pytest.raises(ValueError, match="assistant"):
        blazen.ChatMessage(role="user", content="x", provider_items=(item,))
    with pytest.raises(TypeError):
        blazen.ChatMessage(role="assistant", content="x", provider_items=({"a": 1},))


def test_a_server_tool_chunk_goes_through_the_event_codec_and_back():
    """A chunk's ServerToolEvent survives a transcript or Redis round trip."""
    event = blazen.ServerToolEvent(
        provider="anthropic", name="web_search", status="running", id="srvtoolu_1", raw={"a": 1}
    )
    chunk = blazen.StreamChunk(server_tool=event)
    kind, (back,) = decode(encode_chunk(chunk))
    assert kind == "chunk" and back == chunk


def test_server_tool_event_status_is_running_or_done():
    """Any other status is refused."""
    with pytest.raises(ValueError, match="running"):
        blazen.ServerToolEvent(provider="gemini", name="x", status="started")


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("pause_turn", False, "paused"),
        ("model_context_window_exceeded", False, "length"),
        ("RECITATION", False, "content_filter"),
        ("BLOCKLIST", False, "content_filter"),
        ("PROHIBITED_CONTENT", False, "content_filter"),
        ("SPII", False, "content_filter"),
        ("IMAGE_SAFETY", False, "content_filter"),
        ("end_turn", True, "tool_calls"),
        ("STOP", True, "tool_calls"),
        ("OTHER", False, ""),
        (None, False, ""),
    ],
)
def test_documented_finish_reasons_map_as_the_table_says(raw, calls, expected):
    """Each raw reason the issue names is reported as documented."""
    assert normalise_finish_reason(raw, calls) == expected


def test_every_row_of_the_table_is_what_normalise_reports():
    """The table is the code: every row (but the typed errors) normalises to its value."""
    for table in FINISH_REASONS.values():
        for raw, normal in table.items():
            if normal != "error":
                assert normalise_finish_reason(raw, False) == normal, raw


def test_an_unknown_finish_reason_is_empty_and_logged_once(caplog):
    """Never silently "stop": "" with a warning the first time, and only the first."""
    caplog.set_level(logging.WARNING, logger="blazen")
    assert normalise_finish_reason("weird_new_reason_27", False) == ""
    assert normalise_finish_reason("weird_new_reason_27", True) == ""
    logged = [r for r in caplog.records if "weird_new_reason_27" in r.getMessage()]
    assert len(logged) == 1


def test_an_unknown_finish_reason_keeps_its_raw_value_on_the_response():
    """The response reports "" and keeps the provider's word."""
    state = blazen._kit.StreamState()
    state.raw_finish_reason = "brand_new_stop_27"
    state.finished = True
    resp = state.response()
    assert (resp.finish_reason, resp.raw_finish_reason) == ("", "brand_new_stop_27")


def test_the_readme_finish_reason_table_is_the_one_the_code_generates():
    """The documented mapping is generated from FINISH_REASONS, never written by hand."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text() for p in docs if p.exists())
    assert finish_reason_table() in text


@pytest.mark.parametrize("provider", ["ollama", "gemini"])
def test_a_provider_refuses_an_effort_it_does_not_document(provider):
    """Gemini's thinkingLevel and Ollama's think have no "max": refused before sending."""
    req = Llm.completion_request([Llm.user("hi")], reasoning_effort="max")
    with pytest.raises(blazen.UnsupportedError, match="reasoning_effort"):
        build(provider, req)


def test_request_options_are_checked_when_built():
    """reasoning_display, reasoning_budget and max_continuations refuse bad values at once."""
    with pytest.raises(ValueError, match="reasoning_display"):
        Llm.completion_request([Llm.user("hi")], reasoning_display="hidden")
    with pytest.raises(TypeError):
        Llm.completion_request([Llm.user("hi")], reasoning_budget="lots")
    with pytest.raises(ValueError, match="max_continuations"):
        Llm.completion_request([Llm.user("hi")], max_continuations=-1)
    req = Llm.completion_request([Llm.user("hi")], reasoning_budget="adaptive")
    assert req.reasoning_budget == "adaptive"


def test_max_continuations_is_a_model_option_defaulting_to_five():
    """Providers take max_continuations; a negative one is refused."""
    model = blazen.Providers.anthropic(api_key="k")
    assert model.options.max_continuations == 5
    with pytest.raises(ValueError, match="max_continuations"):
        blazen.Providers.anthropic(api_key="k", max_continuations=-1)


def test_finish_reason_table_rows_are_markdown():
    """Each row names a wire, a raw reason in backticks and what it is reported as."""
    rows = finish_reason_table().splitlines()[2:]
    assert rows and all(re.match(r"^\| \w+ \| `[^`]+` \| .+ \|$", r) for r in rows)


def test_the_table_has_every_ending_the_openai_package_lists_for_a_response():
    """Each Responses status and incomplete_details.reason of the openai package has a row."""
    from typing import get_args

    from openai.types.responses.response import IncompleteDetails
    from openai.types.responses.response_status import ResponseStatus

    reasons = get_args(get_args(IncompleteDetails.model_fields["reason"].annotation)[0])
    unfinished = {"in_progress", "queued"}  # a background response not yet answered
    listed = set(reasons) | (set(get_args(ResponseStatus)) - unfinished)
    assert listed <= set(FINISH_REASONS["responses"])


def test_the_table_has_every_stop_reason_the_anthropic_and_openai_packages_list():
    """Claude's StopReason and a chat chunk's finish_reason: each one has a row."""
    from typing import get_args

    from anthropic.types import StopReason
    from openai.types.chat.chat_completion_chunk import Choice

    assert set(get_args(StopReason)) <= set(FINISH_REASONS["anthropic"])
    chat = get_args(get_args(Choice.model_fields["finish_reason"].annotation)[0])
    assert chat and set(chat) <= set(FINISH_REASONS["openai"])

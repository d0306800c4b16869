"""The OpenAI wire format: what counts as generated text, usage, errors."""

from __future__ import annotations

import pytest

from tunegate.loadgen.openai import (
    ProtocolViolation,
    build_payload,
    read_chunk,
    read_whole_response,
)


def test_completion_payload_asks_for_usage_and_ignore_eos() -> None:
    body = build_payload(endpoint="completions", model="m", prompt="hi", max_tokens=8,
                         stream=True, ignore_eos=True)
    assert body == {"model": "m", "prompt": "hi", "max_tokens": 8, "stream": True,
                    "ignore_eos": True, "stream_options": {"include_usage": True}}


def test_chat_payload_wraps_the_prompt_as_one_user_message() -> None:
    body = build_payload(endpoint="chat", model="m", prompt="hi", max_tokens=8,
                         stream=False, ignore_eos=False)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream_options" not in body and "ignore_eos" not in body


def test_role_only_delta_carries_no_text() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    assert read_chunk(chunk, "chat").text == ""


def test_content_and_reasoning_deltas_are_generated_text() -> None:
    assert read_chunk({"choices": [{"delta": {"content": "Hi"}}]}, "chat").text == "Hi"
    reasoning = {"choices": [{"delta": {"reasoning_content": "think", "content": None}}]}
    assert read_chunk(reasoning, "chat").text == "think"
    assert read_chunk({"choices": [{"delta": {"reasoning": "r"}}]}, "chat").text == "r"


def test_completion_text_and_finish_reason() -> None:
    view = read_chunk({"choices": [{"text": " a", "finish_reason": "length"}]}, "completions")
    assert (view.text, view.finish_reason) == (" a", "length")


def test_usage_only_chunk_with_empty_choices() -> None:
    view = read_chunk({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 32}},
                      "completions")
    assert (view.text, view.prompt_tokens, view.completion_tokens) == ("", 7, 32)


@pytest.mark.parametrize(
    "payload",
    [
        {"error": {"message": "boom", "type": "InternalError"}},
        {"error": "boom"},
        {"object": "error", "message": "boom"},
    ],
)
def test_in_band_error_objects(payload: dict[str, object]) -> None:
    assert read_chunk(payload, "chat").error == "boom"


@pytest.mark.parametrize("payload", [[1, 2], "text", {"id": "x"}, {"choices": "no"},
                                     {"choices": [3]}])
def test_wrong_shapes_are_protocol_violations(payload: object) -> None:
    with pytest.raises(ProtocolViolation):
        read_chunk(payload, "completions")


def test_whole_chat_response_reads_the_message() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "all of it"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
    view = read_whole_response(body, "chat")
    assert (view.text, view.completion_tokens) == ("all of it", 3)


def test_boolean_usage_values_are_not_counts() -> None:
    view = read_chunk({"choices": [], "usage": {"completion_tokens": True}}, "chat")
    assert view.completion_tokens is None

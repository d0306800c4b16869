"""Reasoning and answer text read apart, on the chunk shapes real servers send.

Each shape names its source. SGLang serialises every field of its ``DeltaMessage`` (nulls
included) and puts ``reasoning_tokens`` at the top of ``usage``
(``python/sglang/srt/entrypoints/openai/protocol.py``: ``DeltaMessage``, ``UsageInfo``). vLLM
serialises with ``exclude_unset``, names the field ``reasoning`` and reports
``usage.completion_tokens_details.reasoning_tokens`` with a reasoning parser
(``vllm/entrypoints/openai/engine/protocol.py`` ``DeltaMessage`` / ``CompletionTokenUsageInfo``,
``chat_completion/serving.py`` ``_make_completion_tokens_details``); some versions copied
``reasoning`` into the deprecated ``reasoning_content`` (``handle_deprecated_reasoning_content``).
DeepSeek's API streams ``reasoning_content`` (its "Reasoning Model (deepseek-reasoner)" guide).
"""

from __future__ import annotations

import pytest

from tunegate.loadgen.openai import read_chunk, read_whole_response

SGLANG_REASONING = {
    "id": "a1b2", "object": "chat.completion.chunk", "created": 1754400000, "model": "qwen3",
    "choices": [{"index": 0, "delta": {"role": None, "content": None,
                                       "reasoning_content": "Okay", "tool_calls": None},
                 "logprobs": None, "finish_reason": None, "matched_stop": None}],
    "usage": None,
}
SGLANG_ANSWER = {
    "id": "a1b2", "object": "chat.completion.chunk", "created": 1754400000, "model": "qwen3",
    "choices": [{"index": 0, "delta": {"role": None, "content": "391",
                                       "reasoning_content": None, "tool_calls": None},
                 "logprobs": None, "finish_reason": None, "matched_stop": None}],
    "usage": None,
}
SGLANG_USAGE = {
    "id": "a1b2", "object": "chat.completion.chunk", "created": 1754400000, "model": "qwen3",
    "choices": [],
    "usage": {"prompt_tokens": 12, "total_tokens": 140, "completion_tokens": 128,
              "prompt_tokens_details": None, "reasoning_tokens": 96},
}
VLLM_REASONING = {
    "id": "chatcmpl-9f", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "Qwen/Qwen3-0.6B",
    "choices": [{"index": 0, "delta": {"reasoning": "Okay"}, "logprobs": None,
                 "finish_reason": None}],
}
VLLM_BOTH_KEYS = {
    "id": "chatcmpl-9f", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "Qwen/Qwen3-0.6B",
    "choices": [{"index": 0, "delta": {"reasoning": "Okay", "reasoning_content": "Okay"},
                 "logprobs": None, "finish_reason": None}],
}
# vLLM's DeepSeek-R1 parser returns DeltaMessage(reasoning=..., content=...) when </think> falls
# inside one delta (deepseek_r1_reasoning_parser.py; vllm PR #43938 shows the mixed chunk).
VLLM_BOUNDARY = {
    "id": "chatcmpl-9f", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "choices": [{"index": 0, "delta": {"reasoning": " final thought.", "content": "Answer"},
                 "logprobs": None, "finish_reason": None}],
}
VLLM_USAGE = {
    "id": "chatcmpl-9f", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "Qwen/Qwen3-0.6B", "choices": [],
    "usage": {"prompt_tokens": 12, "total_tokens": 140, "completion_tokens": 128,
              "completion_tokens_details": {"reasoning_tokens": 96}},
}
DEEPSEEK_REASONING = {
    "id": "930c60df", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "deepseek-reasoner",
    "choices": [{"index": 0, "delta": {"content": None, "reasoning_content": "Hmm"},
                 "logprobs": None, "finish_reason": None}],
}
DEEPSEEK_USAGE = {
    "id": "930c60df", "object": "chat.completion.chunk", "created": 1754400000,
    "model": "deepseek-reasoner", "choices": [],
    "usage": {"prompt_tokens": 22, "prompt_cache_hit_tokens": 5, "prompt_cache_miss_tokens": 17,
              "completion_tokens": 13, "total_tokens": 35,
              "completion_tokens_details": {"reasoning_tokens": 9}},
}


@pytest.mark.parametrize("chunk", [SGLANG_REASONING, VLLM_REASONING, DEEPSEEK_REASONING])
def test_a_reasoning_delta_is_reasoning_and_is_generated_text(chunk: dict[str, object]) -> None:
    view = read_chunk(chunk, "chat")
    assert view.answer == ""
    assert view.reasoning in ("Okay", "Hmm")
    assert view.text == view.reasoning  # still a first token under the TTFT rule


def test_an_answer_delta_beside_a_null_reasoning_key_is_answer() -> None:
    view = read_chunk(SGLANG_ANSWER, "chat")
    assert (view.reasoning, view.answer) == ("", "391")


def test_both_reasoning_keys_with_the_same_text_count_once() -> None:
    view = read_chunk(VLLM_BOTH_KEYS, "chat")
    assert view.reasoning == "Okay"
    assert view.text == "Okay"  # not "OkayOkay": characters and tokenizer counts stay right


def test_the_boundary_chunk_carries_both_reasoning_and_answer() -> None:
    view = read_chunk(VLLM_BOUNDARY, "chat")
    assert (view.reasoning, view.answer) == (" final thought.", "Answer")


@pytest.mark.parametrize(
    ("chunk", "completion", "reasoning"),
    [(SGLANG_USAGE, 128, 96), (VLLM_USAGE, 128, 96), (DEEPSEEK_USAGE, 13, 9)],
)
def test_reasoning_tokens_are_read_where_each_server_puts_them(
    chunk: dict[str, object], completion: int, reasoning: int
) -> None:
    view = read_chunk(chunk, "chat")
    assert (view.completion_tokens, view.reasoning_tokens) == (completion, reasoning)
    assert view.text == ""


def test_a_default_zero_in_one_place_does_not_hide_the_count_in_the_other() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 40, "reasoning_tokens": 30,
             "completion_tokens_details": {"reasoning_tokens": 0}}
    assert read_chunk({"choices": [], "usage": usage}, "chat").reasoning_tokens == 30


def test_no_reasoning_count_when_the_server_reports_none() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 40, "total_tokens": 43}
    assert read_chunk({"choices": [], "usage": usage}, "chat").reasoning_tokens is None
    details = {"prompt_tokens": 3, "completion_tokens": 40,
               "completion_tokens_details": {"reasoning_tokens": True}}
    assert read_chunk({"choices": [], "usage": details}, "chat").reasoning_tokens is None


def test_a_whole_chat_response_splits_message_reasoning_from_content() -> None:
    body = {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "reasoning": "Let me add.",
                                     "content": "4"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7,
                      "completion_tokens_details": {"reasoning_tokens": 5}}}
    view = read_whole_response(body, "chat")
    assert (view.reasoning, view.answer, view.reasoning_tokens) == ("Let me add.", "4", 5)


def test_completion_text_is_always_answer_text() -> None:
    view = read_chunk({"choices": [{"index": 0, "text": "<think>x", "finish_reason": None}]},
                      "completions")
    assert (view.reasoning, view.answer) == ("", "<think>x")

"""Where each token count of a record comes from: the server's usage, a tokenizer, or events.

Best source first: the server's own ``usage`` (it counted what it generated), else a tokenizer
the user named (``--tokenizer``), else, for output only, the number of content events, marked
approximate (one event may carry several tokens). Reasoning and answer tokens are split the same
way, except that an event count is never used for them.
"""

from __future__ import annotations

from collections.abc import Callable

from tunegate.loadgen.openai import Endpoint
from tunegate.loadgen.records import CountSource, RequestRecord
from tunegate.workload.spec import RequestSpec

__all__ = ["TokenCounter", "assign_counts", "assign_reasoning_counts"]

TokenCounter = Callable[[str], int]
"""Counts tokens of a text with a real tokenizer the user named."""


def assign_counts(
    record: RequestRecord,
    spec: RequestSpec,
    text: str,
    count_tokens: TokenCounter | None,
    endpoint: Endpoint,
) -> None:
    """Choose each token count from the best source available: usage, tokenizer, events."""
    if count_tokens is not None:
        record.tokenizer_output_tokens = count_tokens(text)
    if record.usage_completion_tokens is not None:
        record.output_tokens = record.usage_completion_tokens
        record.output_tokens_source = CountSource.USAGE
    elif record.tokenizer_output_tokens is not None:
        record.output_tokens = record.tokenizer_output_tokens
        record.output_tokens_source = CountSource.TOKENIZER
    else:
        record.output_tokens = record.content_events
        record.output_tokens_source = CountSource.EVENTS

    if record.usage_prompt_tokens is not None:
        record.input_tokens = record.usage_prompt_tokens
        record.input_tokens_source = CountSource.USAGE
    elif spec.input_tokens is not None:
        record.input_tokens = spec.input_tokens
        record.input_tokens_source = CountSource.WORKLOAD
    elif count_tokens is not None and endpoint == "completions":
        # A chat template adds tokens the client cannot see, so only raw prompts are counted.
        record.input_tokens = count_tokens(spec.prompt)
        record.input_tokens_source = CountSource.TOKENIZER


def _usage_split(record: RequestRecord) -> tuple[int, int] | None:
    """(reasoning, answer) tokens from the server's usage, when its count can be believed.

    A count above ``completion_tokens`` is impossible, and a 0 beside streamed reasoning text
    means the server did not count (SGLang's ``usage.reasoning_tokens`` defaults to 0).
    """
    reported, completion = record.usage_reasoning_tokens, record.usage_completion_tokens
    if reported is None or completion is None or not 0 <= reported <= completion:
        return None
    if reported == 0 and record.reasoning_streamed:
        return None
    return reported, completion - reported


def assign_reasoning_counts(
    record: RequestRecord,
    reasoning_text: str,
    answer_text: str,
    count_tokens: TokenCounter | None,
) -> None:
    """Reasoning and answer tokens apart: the server's usage, else a named tokenizer, else unknown.

    Never estimated from event or word counts: one event may carry many tokens.
    """
    if count_tokens is not None and record.reasoning_streamed:
        record.tokenizer_reasoning_tokens = count_tokens(reasoning_text)
    split = _usage_split(record)
    if split is not None:
        record.reasoning_tokens, record.answer_tokens = split
        record.reasoning_tokens_source = CountSource.USAGE
    elif record.tokenizer_reasoning_tokens is not None and count_tokens is not None:
        record.reasoning_tokens = record.tokenizer_reasoning_tokens
        record.reasoning_tokens_source = CountSource.TOKENIZER
        record.answer_tokens = count_tokens(answer_text) if answer_text else 0

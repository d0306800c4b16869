"""One request's state while it is in flight, and how each SSE event changes it.

The client (:mod:`tunegate.loadgen.client`) feeds events in as their bytes are read; the
observation folds each chunk in with its receipt time, records the first failure (later ones
change nothing, nor does anything after ``[DONE]``) and becomes a
:class:`~tunegate.loadgen.records.RequestRecord` at the end. Every text taken from the server is
masked for the API key before it is kept.
"""

from __future__ import annotations

import json
import time

from tunegate.loadgen.client_config import ClientConfig
from tunegate.loadgen.counts import TokenCounter, assign_counts, assign_reasoning_counts
from tunegate.loadgen.limits import ResponseLimits
from tunegate.loadgen.openai import ChunkView, ProtocolViolation, read_chunk
from tunegate.loadgen.records import ANSWER, BOTH, REASONING, Outcome, RequestRecord
from tunegate.loadgen.redact import mask_secrets
from tunegate.loadgen.sse import SSEEvent
from tunegate.workload.spec import RequestSpec

__all__ = ["Observation", "handle_event"]


class Observation:
    """Mutable state of one request while it is in flight."""

    def __init__(self, spec: RequestSpec, config: ClientConfig, t_issue_ns: int,
                 limits: ResponseLimits | None = None) -> None:
        self.spec = spec
        self.config = config
        self.limits = limits or ResponseLimits.for_request(
            {"max_tokens": spec.max_tokens, **config.extra_body}, len(spec.prompt.encode()))
        self.t_issue_ns = t_issue_ns
        self.t_send_ns = t_issue_ns  # refined by the trace hooks when the bytes go out
        self.body_started = False
        self.connection_retries = 0
        self.t_end_ns: int | None = None
        self.outcome: Outcome | None = None
        self.error: str | None = None
        self.http_status: int | None = None
        self.response_streamed: bool | None = None
        self.content_times_ns: list[int] = []
        self.content_chars: list[int] = []
        self.content_kinds: list[str] = []
        self.pieces: list[str] = []
        self.reasoning_pieces: list[str] = []
        self.answer_pieces: list[str] = []
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.reasoning_tokens: int | None = None
        self.done = False

    def masked(self, text: str, *, cut: bool = False) -> str:
        """Server text with the API key masked: a server may echo the ``Authorization``
        header, and records reach ``--out`` files and the console. Mask *before* shortening,
        so a shortened text never keeps half a key."""
        return mask_secrets(text, [self.config.api_key], cut=cut)

    def fail(self, outcome: Outcome, error: str, t_ns: int | None = None) -> None:
        """Record the first failure; later ones, and any after ``[DONE]``, change nothing."""
        if self.outcome is None and not self.done:
            self.outcome = outcome
            self.error = self.masked(error)
            self.t_end_ns = t_ns if t_ns is not None else time.monotonic_ns()

    def absorb(self, view: ChunkView, t_ns: int) -> None:
        """Fold one chunk's information in; ``t_ns`` is its receipt time."""
        if view.error is not None:
            self.fail(Outcome.SERVER_ERROR, f"in-band error: {view.error}", t_ns)
            return
        impossible = self.limits.usage_violation(view)
        if impossible is not None:
            self.fail(Outcome.PROTOCOL_ERROR, impossible, t_ns)
            return
        if view.text:
            self.content_times_ns.append(t_ns)
            self.content_chars.append(len(view.text))
            self.pieces.append(view.text)
            if view.reasoning:
                self.reasoning_pieces.append(view.reasoning)
            if view.answer:
                self.answer_pieces.append(view.answer)
            self.content_kinds.append(
                (BOTH if view.answer else REASONING) if view.reasoning else ANSWER)
        if view.finish_reason is not None:
            self.finish_reason = view.finish_reason
        if view.prompt_tokens is not None:
            self.prompt_tokens = view.prompt_tokens
        if view.completion_tokens is not None:
            self.completion_tokens = view.completion_tokens
        if view.reasoning_tokens is not None:
            self.reasoning_tokens = view.reasoning_tokens

    def _first_answer_ns(self) -> int | None:
        return next((t for t, kind in zip(self.content_times_ns, self.content_kinds, strict=True)
                     if kind != REASONING), None)

    def to_record(self, count_tokens: TokenCounter | None) -> RequestRecord:
        text = "".join(self.pieces)
        kinds = "".join(self.content_kinds)
        record = RequestRecord(
            index=self.spec.index,
            warmup=self.spec.warmup,
            outcome=self.outcome or Outcome.COMPLETE,
            streamed=self.config.stream,
            t_send_ns=self.t_send_ns,
            t_issue_ns=self.t_issue_ns,
            t_end_ns=self.t_end_ns if self.t_end_ns is not None else time.monotonic_ns(),
            t_first_ns=self.content_times_ns[0] if self.content_times_ns else None,
            t_last_ns=self.content_times_ns[-1] if self.content_times_ns else None,
            content_times_ns=self.content_times_ns,
            content_chars=self.content_chars,
            content_kinds=kinds if REASONING in kinds or BOTH in kinds else "",
            t_first_answer_ns=self._first_answer_ns(),
            usage_prompt_tokens=self.prompt_tokens,
            usage_completion_tokens=self.completion_tokens,
            usage_reasoning_tokens=self.reasoning_tokens,
            requested_max_tokens=self.spec.max_tokens,
            ignore_eos=self.config.ignore_eos,
            http_status=self.http_status,
            finish_reason=self.finish_reason,
            error=self.error,
            response_streamed=self.response_streamed,
            connection_retries=self.connection_retries,
            generated_text=self.masked(text) if self.config.keep_text else None,
        )
        assign_counts(record, self.spec, text, count_tokens, self.config.endpoint)
        assign_reasoning_counts(record, "".join(self.reasoning_pieces),
                                 "".join(self.answer_pieces), count_tokens)
        return record


def handle_event(obs: Observation, event: SSEEvent) -> None:
    """Apply one dispatched SSE event to the observation."""
    if obs.done or obs.outcome is not None:
        return
    if event.event == "error":
        obs.fail(Outcome.SERVER_ERROR, f"event: error: {obs.masked(event.data)[:500]}",
                 event.t_ns)
        return
    if event.invalid_utf8:
        obs.fail(Outcome.PROTOCOL_ERROR, "event holds bytes that are not UTF-8 (an SSE stream "
                 f"is UTF-8 text): {obs.masked(event.data)[:200]!r}", event.t_ns)
        return
    if event.event != "message":
        return  # other event types carry no OpenAI payload
    data = event.data.strip()
    if data == "[DONE]":
        obs.done = True
        obs.t_end_ns = event.t_ns
        return
    if not data:
        return
    try:
        view = read_chunk(json.loads(data), obs.config.endpoint)
    except (ValueError, RecursionError, ProtocolViolation) as exc:  # nesting past the stack
        obs.fail(Outcome.PROTOCOL_ERROR,
                 f"unreadable chunk ({exc}): {obs.masked(data)[:200]!r}", event.t_ns)
        return
    obs.absorb(view, event.t_ns)

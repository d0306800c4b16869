"""token_count_mismatch and server_client_disagree; every code documented in one place."""

from __future__ import annotations

from pathlib import Path

from tunegate.gauge import (
    CHECKS,
    CODES,
    Dataset,
    RequestSample,
    RunContext,
    Severity,
    Summary,
    validate_dataset,
    validate_records,
)
from tunegate.gauge.dataset import Stat
from tunegate.testing import make_record, token_times

MS = 1_000_000


def _req(**kw: object) -> RequestSample:
    fields: dict[str, object] = {"ok": True, "ttft_s": 0.2, "e2el_s": 1.0, "input_tokens": 50,
                                 "output_tokens": 32}
    return RequestSample(**(fields | kw))  # type: ignore[arg-type]


def _codes(reqs: list[RequestSample], **ctx: object) -> list[str]:
    data = Dataset("x", Summary(completed=len(reqs)), tuple(reqs),
                   RunContext(**ctx))  # type: ignore[arg-type]
    return validate_dataset(data).codes()


def test_usage_and_tokenizer_disagreeing_is_a_mismatch() -> None:
    assert "token_count_mismatch" in _codes([_req(usage_output_tokens=32,
                                                  tokenizer_output_tokens=40)])
    assert "token_count_mismatch" not in _codes([_req(usage_output_tokens=32,
                                                      tokenizer_output_tokens=33)])


def test_more_content_events_than_usage_tokens_is_a_mismatch() -> None:
    assert "token_count_mismatch" in _codes([_req(usage_output_tokens=10, content_events=32)])


def test_short_output_despite_ignore_eos_is_a_mismatch() -> None:
    short = _req(output_tokens=20, requested_max_tokens=32, ignore_eos=True)
    assert "token_count_mismatch" in _codes([short])
    assert "token_count_mismatch" not in _codes([_req(requested_max_tokens=32, ignore_eos=True)])
    assert "token_count_mismatch" not in _codes([_req(output_tokens=20, requested_max_tokens=32,
                                                      ignore_eos=False)])


def test_records_keep_what_was_asked_for() -> None:
    record = make_record(times_ns=token_times(400, 20, 16))
    record.requested_max_tokens, record.ignore_eos = 32, True
    finding = next(f for f in validate_records([record]).findings
                   if f.code == "token_count_mismatch")
    assert finding.evidence["short_despite_ignore_eos"] == 1


def _server(ttft_s: float, e2e_s: float, count: int = 20, tokens: float = 640.0) -> dict:
    return {"vllm:time_to_first_token_seconds": {"count": count, "sum": ttft_s * count},
            "vllm:e2e_request_latency_seconds": {"count": count, "sum": e2e_s * count},
            "vllm:generation_tokens_total": tokens}


def _summary_data(server: dict) -> Dataset:
    summary = Summary(completed=20, ttft_ms=Stat(mean=200.0), e2el_ms=Stat(mean=1000.0),
                      total_output_tokens=640.0)
    return Dataset("x", summary, context=RunContext(server_metrics=server))


def test_server_and_client_agree() -> None:
    report = validate_dataset(_summary_data(_server(0.19, 0.99)))
    assert "server_client_disagree" not in report.codes()


def test_client_faster_than_the_server_disagrees() -> None:
    report = validate_dataset(_summary_data(_server(0.5, 0.99)))
    finding = next(f for f in report.findings if f.code == "server_client_disagree")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["disagree"]["ttft_s"]["verdict"] == "client_faster"


def test_request_and_token_counts_must_match() -> None:
    report = validate_dataset(_summary_data(_server(0.19, 0.99, count=40, tokens=1280.0)))
    disagree = next(f for f in report.findings
                    if f.code == "server_client_disagree").evidence["disagree"]
    assert set(disagree) == {"requests", "output_tokens"}


def test_every_check_and_finding_code_is_documented() -> None:
    assert set(CHECKS) <= set(CODES)
    assert "summary_only" in CODES
    for code in CODES:
        assert code.isidentifier() and code == code.lower()


def test_readme_findings_table_lists_every_code() -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    missing = [code for code in CODES if f"| `{code}` |" not in readme]
    assert not missing, missing

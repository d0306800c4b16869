"""Whether two measurements can be compared: every reason names the field and both values.

The rules read plain :class:`~tunegate.report.compare_model.Comparable` values, built here
field by field, so each specification changes exactly one thing.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from tunegate.fingerprint.fields import FIELDS, Fingerprint, measured, unknown
from tunegate.report.comparability import LENGTH_TOLERANCE, Load, caveats, why_not_comparable
from tunegate.report.compare_model import Comparable

WORKLOAD = {"dataset": "synthetic", "num_requests": 100, "input_tokens": "fixed:64",
            "output_tokens": "fixed:16", "seed": 0, "concurrency": 4, "request_rate": None}


def _fingerprint(**changes: Any) -> Fingerprint:
    values: dict[str, Any] = {name: f"same-{name}" for name in FIELDS}
    values |= {"workload.digest": "sha256:" + "a" * 64, "benchmark.digest": "sha256:" + "b" * 64,
               "engine.name": "vllm", "accelerator.count": 1}
    values |= {name.replace("_", "."): value for name, value in changes.items()}
    return Fingerprint({name: measured(v, "test") for name, v in values.items()})


def _input(label: str, **changes: Any) -> Comparable:
    base = Comparable(
        label=label, kind="bench", source=f"/results/{label}", figures={"output_throughput": 100.0},
        repeats=None, valid=True, load=Load(64.0, 16.0, 4, math.inf, True),
        workload=dict(WORKLOAD), engine="vllm", model="llama", fingerprint=_fingerprint())
    return replace(base, **changes)


def test_identical_inputs_are_comparable_without_caveat() -> None:
    a, b = _input("a.json"), _input("b.json")
    assert why_not_comparable(a, b) == []
    assert caveats(a, b) == []


def test_a_different_workload_names_the_setting_and_both_values() -> None:
    a = _input("a.json")
    b = _input("b.json", workload={**WORKLOAD, "num_requests": 50},
               fingerprint=_fingerprint(workload_digest="sha256:" + "c" * 64))
    assert why_not_comparable(a, b) == ["workload.num_requests: 100 (a.json) vs 50 (b.json)"]


def test_a_differing_digest_no_setting_explains_is_named_itself() -> None:
    a = _input("a.json")
    b = _input("b.json", fingerprint=_fingerprint(workload_digest="sha256:" + "c" * 64))
    [reason] = why_not_comparable(a, b)
    assert reason.startswith("workload.digest: 'sha256:aaaaaaaaaaaa…' (a.json) vs "
                             "'sha256:cccccccccccc…' (b.json)")


def test_stream_and_engine_differences_are_named() -> None:
    a = _input("a.json")
    b = _input("b.json", load=Load(64.0, 16.0, 4, math.inf, False), engine="sglang",
               fingerprint=_fingerprint(engine_name="sglang"))
    reasons = why_not_comparable(a, b)
    assert "stream: true (a.json) vs false (b.json)" in reasons
    assert "engine: 'vllm' (a.json) vs 'sglang' (b.json)" in reasons
    assert not any("engine.name" in r for r in reasons)  # named once, as the engine


def test_an_invalidating_fingerprint_field_is_named_with_both_values() -> None:
    a = _input("a.json")
    b = _input("b.json", fingerprint=_fingerprint(accelerator_count=8))
    assert why_not_comparable(a, b) == [
        "fingerprint accelerator.count: 1 (a.json) vs 8 (b.json)"]


def test_an_unknown_invalidating_field_confirms_nothing() -> None:
    fp = _fingerprint().replace({"engine.version": unknown("GET /version answered 404")})
    reasons = why_not_comparable(_input("a.json"), _input("b.json", fingerprint=fp))
    assert reasons == ["fingerprint engine.version: 'same-engine.version' (a.json) vs "
                       "unknown (GET /version answered 404) (b.json)"]


def test_a_soft_fingerprint_difference_is_a_caveat_not_a_reason() -> None:
    a, b = _input("a.json"), _input("b.json", fingerprint=_fingerprint(host_kernel="Linux 7"))
    assert why_not_comparable(a, b) == []
    [caveat] = caveats(a, b)
    assert "host.kernel" in caveat and "'Linux 7'" in caveat


def test_a_figure_the_gauge_invalidated_is_not_comparable_alone() -> None:
    a = _input("a.json")
    b = _input("b.json", invalid={"mean_ttft_ms": ("ttft_equals_e2el",)})
    assert why_not_comparable(a, b) == []
    assert why_not_comparable(a, b, "output_throughput") == []
    assert why_not_comparable(a, b, "mean_ttft_ms") == [
        "mean_ttft_ms of b.json is invalid (ttft_equals_e2el)"]


def _peer(label: str, load: Load, **changes: Any) -> Comparable:
    return _input(label, **({"kind": "vllm", "workload": None, "fingerprint": None, "load": load}
                            | changes))


def test_peer_reports_are_compared_on_lengths_concurrency_and_rate() -> None:
    a = _peer("vllm.json", Load(500.0, 100.0, 64, math.inf, None))
    near = 500.0 * (1 + LENGTH_TOLERANCE / 2)
    assert why_not_comparable(a, _peer("b.json", Load(near, 100.0, 64, math.inf, None))) == []
    far = _peer("sglang.jsonl", Load(1000.0, 100.0, 32, 10.0, None), kind="sglang")
    assert why_not_comparable(a, far) == [
        "workload mean input tokens: 500 (vllm.json) vs 1000 (sglang.jsonl) (more than 10% "
        "apart)",
        "workload max concurrency: 64 (vllm.json) vs 32 (sglang.jsonl)",
        "workload request rate: inf (vllm.json) vs 10 (sglang.jsonl)"]


def test_what_a_side_does_not_know_is_not_held_against_it() -> None:
    a = _peer("a.json", Load(500.0, 100.0, None, None, None), engine=None, model=None)
    b = _peer("b.json", Load(None, 100.0, 64, 5.0, True))
    assert why_not_comparable(a, b) == []
    [caveat] = caveats(a, b)
    assert caveat.startswith("no environment fingerprint for a.json and b.json")


def test_a_different_model_is_named() -> None:
    a = _peer("a.json", Load(), model="meta-llama/Llama-3.1-8B")
    b = _peer("b.json", Load(), model="Qwen/Qwen2.5-3B")
    assert why_not_comparable(a, b) == [
        "model: 'meta-llama/Llama-3.1-8B' (a.json) vs 'Qwen/Qwen2.5-3B' (b.json)"]

"""workload.digest covers every request and the schedule, the same in every process;
benchmark.digest is the settings' canonical JSON, key order irrelevant."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from tunegate.fingerprint.digests import (
    benchmark_field,
    settings_digest,
    workload_digest,
    workload_field,
)
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.spec import ArrivalSchedule, Workload

CONFIG = WorkloadConfig(dataset="synthetic", num_requests=20, concurrency=4, seed=3,
                        input_tokens="64", output_tokens="32")


def _workload(**changes: object) -> Workload:
    return build_workload(CONFIG.model_copy(update=changes))


def test_the_same_workload_has_the_same_digest_in_another_process() -> None:
    code = ("from tunegate.workload import WorkloadConfig, build_workload\n"
            "from tunegate.fingerprint.digests import workload_digest\n"
            f"print(workload_digest(build_workload(WorkloadConfig.model_validate({CONFIG.model_dump()!r}))))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == workload_digest(_workload())


def test_prompts_lengths_seed_and_schedule_all_count() -> None:
    base = _workload()
    digest = workload_digest(base)
    first = base.requests[0]
    edited = [dataclasses.replace(first, prompt=first.prompt + " x"),
              dataclasses.replace(first, max_tokens=first.max_tokens + 1),
              dataclasses.replace(first, warmup=True)]
    for request in edited:
        changed = Workload((request, *base.requests[1:]), base.schedule, base.description)
        assert workload_digest(changed) != digest, request
    reseeded = _workload(seed=4)
    assert workload_digest(reseeded) != digest
    wider = Workload(base.requests, ArrivalSchedule(None, 8), base.description)
    assert workload_digest(wider) != digest


def test_the_description_is_not_the_content() -> None:
    base = _workload()
    relabelled = Workload(base.requests, base.schedule, {"note": "same requests"})
    assert workload_digest(relabelled) == workload_digest(base)


def test_workload_field_says_what_it_hashed() -> None:
    field = workload_field(_workload())
    assert field.source == "configured" and "20 request specs" in field.how
    settings = workload_field(CONFIG.model_dump(mode="json"))
    assert settings.source == "configured" and "workload settings" in settings.how
    assert workload_field(None).source == "unknown"


def test_benchmark_digest_ignores_key_order_but_not_values() -> None:
    a = {"endpoint": "completions", "stream": True, "ignore_eos": True,
         "request_timeout_s": 300.0}
    assert settings_digest(a) == settings_digest(dict(reversed(list(a.items()))))
    assert settings_digest(a) != settings_digest({**a, "stream": False})
    field = benchmark_field(a)
    assert field.value == settings_digest(a)
    assert field.how == ("sha256 of the benchmark settings (endpoint, ignore_eos, "
                         "request_timeout_s, stream)")


def test_settings_that_are_not_json_are_unknown_not_a_crash() -> None:
    field = benchmark_field({"when": object()})
    assert field.source == "unknown" and "not plain JSON data" in field.how
    assert benchmark_field(None).source == "unknown"

"""Shared workloads for the simulator tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload

WorkloadFactory = Callable[..., Workload]


def make_workload(
    n: int = 32,
    input_tokens: int = 64,
    output_tokens: int = 32,
    concurrency: int | None = 8,
    offsets_s: tuple[float, ...] | None = None,
    shared_prefix_words: int = 0,
) -> Workload:
    """``n`` identical-length requests; prompts distinct unless a shared prefix is asked for."""
    prefix = " ".join(f"p{j}" for j in range(shared_prefix_words))
    requests = []
    for i in range(n):
        own = " ".join(f"r{i}w{j}" for j in range(input_tokens - shared_prefix_words))
        prompt = f"{prefix} {own}".strip()
        requests.append(RequestSpec(index=i, prompt=prompt, max_tokens=output_tokens))
    schedule = ArrivalSchedule(
        offsets_s=offsets_s,
        max_concurrency=concurrency,
        kind="closed" if offsets_s is None else "constant",
    )
    return Workload(tuple(requests), schedule)


@pytest.fixture
def workload() -> WorkloadFactory:
    """Factory of small synthetic workloads (see :func:`make_workload`)."""
    return make_workload


@pytest.fixture(scope="session")
def seed_preset_workload() -> Workload:
    """The workload package's ``seed`` preset: the article's 1319-request benchmark."""
    from tunegate.workload.builder import build_workload
    from tunegate.workload.config import WorkloadConfig

    return build_workload(WorkloadConfig(dataset="seed", num_requests=1319))

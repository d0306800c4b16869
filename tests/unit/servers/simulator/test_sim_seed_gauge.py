"""The gauge sees the ``seed`` scenario's prefill pathology in a streamed run, and only then.

``tunegate bench --sim seed --dataset seed --engine-arg enable_chunked_prefill=false``: the
validation reports ``prefill_slower_than_decode`` (warning); with chunked prefill on it does not.
This is the finding the default ``tunegate tune`` run's VALIDATE step must raise.
"""

from __future__ import annotations

import pytest

from tunegate.api import BenchOptions, bench
from tunegate.gauge.findings import Severity
from tunegate.workload import WorkloadConfig


def _findings(chunked: bool) -> dict[str, Severity]:
    options = BenchOptions(
        sim="seed",
        workload=WorkloadConfig.model_validate({"dataset": "seed"}),
        engine_args={"enable_chunked_prefill": str(chunked).lower()},
    )
    result = bench(options)
    return {f.code: f.severity for f in result.validation.findings}


@pytest.mark.parametrize("chunked", [False, True])
def test_prefill_slower_than_decode_fires_only_with_chunked_prefill_off(chunked: bool) -> None:
    findings = _findings(chunked)
    if chunked:
        assert "prefill_slower_than_decode" not in findings
    else:
        assert findings.get("prefill_slower_than_decode") == Severity.WARNING

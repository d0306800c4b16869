"""``plan_design``: which configs (cells) the control experiment measures, and what each runs."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tunegate.attribution.changes import Change
from tunegate.attribution.design import ALWAYS_FACTORIAL, MAX_FACTORIAL, Cell, plan_design

synth: Any = importlib.import_module("tunegate_tests_attribution_synth")  # conftest.py

NAMES = ["a", "b", "c", "d", "e", "f"]


def keys(changes: list[Change], **kw: int) -> list[str]:
    return [c.key for c in plan_design(changes, **kw).cells]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_up_to_four_engine_changes_measure_the_full_factorial(k: int) -> None:
    changes = [synth.engine(n) for n in NAMES[:k]]
    design = plan_design(changes)
    assert design.method == "factorial"
    assert len(design.cells) == 2**k
    assert {c.on for c in design.cells} == {
        frozenset(n for i, n in enumerate(NAMES[:k]) if mask >> i & 1) for mask in range(2**k)}
    assert len({c.key for c in design.cells}) == 2**k
    assert MAX_FACTORIAL == 4


def test_factorial_keys_name_the_baseline_the_kept_config_and_each_change_alone() -> None:
    assert keys([synth.engine("a")]) == ["baseline", "kept"]
    assert keys([synth.engine("a"), synth.engine("b")]) == ["baseline", "+a", "+b", "kept"]
    three = plan_design([synth.engine(n) for n in "abc"])
    by_on = {frozenset(c.on): c.key for c in three.cells}
    assert by_on[frozenset()] == "baseline" and by_on[frozenset("abc")] == "kept"
    assert [by_on[frozenset(n)] for n in "abc"] == ["+a", "+b", "+c"]
    assert by_on[frozenset("ab")] == "kept-c"  # the kept config less one change


def test_every_engine_cell_is_measured_with_every_gauge_fix() -> None:
    changes = [synth.gauge("stream"), synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    assert design.method == "factorial"
    assert [c.key for c in design.cells] == ["gauge-before", "baseline", "+a", "+b", "kept"]
    engine_cells = [c for c in design.cells if c.key != "gauge-before"]
    assert all(c.gauge_on == {"benchmark.stream"} for c in engine_cells)
    before = design.cell("gauge-before")
    assert before.on == frozenset() and before.gauge_on == frozenset()


def test_five_changes_are_measured_one_at_a_time_in_2k_plus_2_cells() -> None:
    design = plan_design([synth.engine(n) for n in NAMES[:5]])
    assert design.method == "one_at_a_time"
    assert [c.key for c in design.cells] == [
        "baseline", "+a", "+b", "+c", "+d", "+e",
        "kept-a", "kept-b", "kept-c", "kept-d", "kept-e", "kept"]
    every = frozenset(NAMES[:5])
    assert design.cell("+c").on == {"c"}
    assert design.cell("kept-c").on == every - {"c"}
    assert design.cell("kept").on == every


def test_max_factorial_decides_between_the_designs() -> None:
    four = [synth.engine(n) for n in NAMES[:4]]
    assert plan_design(four, max_factorial=3).method == "one_at_a_time"
    assert len(plan_design(four, max_factorial=3).cells) == 2 * 4 + 2
    five = [synth.engine(n) for n in NAMES[:5]]
    assert plan_design(five, max_factorial=5).method == "factorial"
    assert len(plan_design(five, max_factorial=5).cells) == 32


def test_up_to_three_changes_are_the_factorial_whatever_max_factorial_says() -> None:
    """With three changes the factorial's 8 configs cost no more than one at a time's 2k + 2
    and tell more (every interaction): a lower max_factorial does not trade it away."""
    three = [synth.engine(n) for n in NAMES[:3]]
    for max_factorial in (1, 2, 3):
        design = plan_design(three, max_factorial=max_factorial)
        assert design.method == "factorial", max_factorial
        assert len(design.cells) == 8
    assert ALWAYS_FACTORIAL == 3
    four = [synth.engine(n) for n in NAMES[:4]]
    assert plan_design(four, max_factorial=3).method == "one_at_a_time"
    assert plan_design(four, max_factorial=1).method == "one_at_a_time"


def test_one_at_a_time_never_lists_a_config_twice() -> None:
    # with two changes, add-one and leave-one-out are the same configs: the factorial
    design = plan_design([synth.engine("a"), synth.engine("b")], max_factorial=1)
    assert design.method == "factorial"
    cell_keys = [c.key for c in design.cells]
    assert len(cell_keys) == len(set(cell_keys)), cell_keys
    assert len({c.on for c in design.cells}) == len(cell_keys)


def test_only_gauge_changes_measure_the_gauge_before_and_the_baseline() -> None:
    design = plan_design([synth.gauge("stream")])
    assert design.method == "gauge_only"
    assert [c.key for c in design.cells] == ["gauge-before", "baseline"]
    assert design.cell("baseline").gauge_on == {"benchmark.stream"}


def test_several_gauge_fixes_are_also_measured_each_alone() -> None:
    changes = [synth.gauge("ignore_eos"), synth.gauge("stream"), synth.engine("a")]
    design = plan_design(changes)
    assert [c.key for c in design.cells] == [
        "gauge-before", "gauge-before+benchmark.ignore_eos", "gauge-before+benchmark.stream",
        "baseline", "kept"]
    alone = design.cell("gauge-before+benchmark.stream")
    assert alone.on == frozenset() and alone.gauge_on == {"benchmark.stream"}
    assert design.cell("kept").gauge_on == {"benchmark.ignore_eos", "benchmark.stream"}


def test_no_change_means_no_experiment() -> None:
    design = plan_design([])
    assert design.method == "none" and design.cells == ()
    assert design.schedule(4) == []


BASELINE = {"max_num_seqs": 128, "swap_space": 4, "NCCL_ALGO": "Ring", "block_size": 16}
KEPT = {"max_num_seqs": 256, "NCCL_ALGO": "Tree", "block_size": 16,
        "enable_chunked_prefill": True}
BENCH_BEFORE = {"stream": False, "endpoint": "/v1/completions", "ignore_eos": False}
BENCH_AFTER = {"stream": True, "endpoint": "/v1/completions", "ignore_eos": True}


def real_changes() -> list[Change]:
    from tunegate.attribution.changes import changes_between

    return changes_between(BASELINE, KEPT, BENCH_BEFORE, BENCH_AFTER, {})


def test_the_kept_cell_runs_exactly_the_kept_params_and_the_baseline_the_baseline() -> None:
    changes = real_changes()
    design = plan_design(changes)
    assert design.cell("kept").params(changes, dict(BASELINE)) == KEPT  # swap_space removed
    assert design.cell("baseline").params(changes, dict(BASELINE)) == BASELINE
    for cell in design.cells:
        if cell.key.startswith("gauge-before"):
            assert cell.params(changes, dict(BASELINE)) == BASELINE


def test_a_cell_applies_only_its_own_changes() -> None:
    changes = real_changes()
    design = plan_design(changes)
    removed = design.cell("+swap_space").params(changes, dict(BASELINE))
    assert removed == {k: v for k, v in BASELINE.items() if k != "swap_space"}
    added = design.cell("+enable_chunked_prefill").params(changes, dict(BASELINE))
    assert added == {**BASELINE, "enable_chunked_prefill": True}
    assert design.method == "factorial" and len(design.cells) == 3 + 2**4


def test_the_params_do_not_alter_the_baseline_given() -> None:
    changes = real_changes()
    given = dict(BASELINE)
    plan_design(changes).cell("kept").params(changes, given)
    assert given == BASELINE


def test_bench_is_the_first_gauge_plus_the_cells_gauge_fixes() -> None:
    changes = real_changes()
    design = plan_design(changes)
    assert design.cell("kept").bench(changes, dict(BENCH_BEFORE)) == BENCH_AFTER
    assert design.cell("baseline").bench(changes, dict(BENCH_BEFORE)) == BENCH_AFTER
    assert design.cell("gauge-before").bench(changes, dict(BENCH_BEFORE)) == BENCH_BEFORE
    alone = design.cell("gauge-before+benchmark.stream").bench(changes, dict(BENCH_BEFORE))
    assert alone == {**BENCH_BEFORE, "stream": True}


def test_cells_and_designs_have_a_plain_dict_form() -> None:
    design = plan_design([synth.gauge("stream"), synth.engine("b"), synth.engine("a")])
    assert design.to_dict()["method"] == "factorial"
    assert design.to_dict()["cells"][-1] == {"key": "kept", "on": ["a", "b"],
                                             "gauge_on": ["benchmark.stream"]}
    assert Cell("x", frozenset({"b", "a"}), frozenset()).to_dict()["on"] == ["a", "b"]

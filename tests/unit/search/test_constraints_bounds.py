"""Issue 13: a constraint no config can meet is a config error; repairs stay inside the bounds.

``max_num_seqs >= 1000`` on a space searching ``max_num_seqs`` in [8, 128] made the repair step
run trials at 1000, outside the declared bounds, and one became the recommendation. Now:

* a rule (or a set of rules) that no config of the space meets is refused when the config is
  loaded, naming the rule and the ranges that make it impossible; the check is exact for the
  supported forms (the property below compares it with brute force on small spaces);
* a repair changes only searched parameters, only to values inside their bounds, and the
  config it returns meets every rule (a property over random spaces and rules);
* :meth:`SearchSpace.repair` refuses a repair that moves a parameter out of bounds.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunegate.errors import ConfigError
from tunegate.search.constraints import parse_constraint, parse_constraints
from tunegate.search.space import Constraint, Layer, Light, Param, SearchSpace
from tunegate.tuner.config import load_config

SEQS = Param("max_num_seqs", "int", Layer.MEMORY_CONCURRENCY, low=8, high=128, default=64)
TOKENS = Param("max_num_batched_tokens", "log_int", Layer.SCHEDULING, low=4, high=8192,
               default=2048)
CHUNKED = Param("enable_chunked_prefill", "bool", Layer.FEATURES, default=False)
EAGER_OFF = Param("enforce_eager", "bool", Layer.FEATURES, light=Light.FORBIDDEN, default=False)
POLICY = Param("scheduling_policy", "categorical", Layer.SCHEDULING,
               choices=("fcfs", "priority"), default="fcfs")
BLOCK = Param("block_size", "categorical", Layer.MEMORY_CONCURRENCY, choices=(8, 16, 32),
              default=16)
PARAMS = [SEQS, TOKENS, CHUNKED, EAGER_OFF, POLICY, BLOCK]


# ---- load time ---------------------------------------------------------------------------------
def test_the_issue_s_rule_is_refused_naming_the_bounds() -> None:
    with pytest.raises(ConfigError) as info:
        parse_constraint("max_num_seqs >= 1000", PARAMS)
    assert str(info.value) == (
        "constraint 'max_num_seqs >= 1000': no config of the space can meet it (max_num_seqs is "
        "searched in [8, 128]); widen the bounds or drop the rule")


def test_the_issue_s_rule_in_a_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tune.toml"
    path.write_text('constraints = ["max_num_seqs >= 1000"]\n[workload]\ndataset = "synthetic"\n'
                    'num_requests = 4\ninput_tokens = "8"\noutput_tokens = "4"\nconcurrency = 1\n'
                    '[[space]]\nname = "max_num_seqs"\nkind = "int"\nlayer = '
                    '"memory_concurrency"\nlow = 8\nhigh = 128\ndefault = 64\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^.*tune\.toml: constraint 'max_num_seqs >= 1000': no "
                       r"config of the space can meet it \(max_num_seqs is searched in "
                       r"\[8, 128\]\)"):
        load_config(path)


@pytest.mark.parametrize(("rule", "why"), [
    ("max_num_seqs >= max_num_batched_tokens",
     "max_num_seqs is searched in [8, 128]; max_num_batched_tokens is searched in [4, 8192]"),
    ("enforce_eager or max_num_seqs <= 4", "enforce_eager is fixed at False"),
    ("block_size >= 64", "block_size is one of [8, 16, 32]"),
])
def test_impossible_rules_of_every_form_are_refused(rule: str, why: str) -> None:
    space = [*PARAMS[:3], EAGER_OFF, BLOCK] if "batched" not in rule else [
        SEQS, Param("max_num_batched_tokens", "int", Layer.SCHEDULING, low=200, high=300,
                    default=256)]
    with pytest.raises(ConfigError, match="no config of the space can meet it") as info:
        parse_constraint(rule, space)
    if "batched" not in rule:
        assert why in str(info.value)


def test_possible_rules_of_every_form_are_accepted() -> None:
    for rule in ("max_num_seqs <= max_num_batched_tokens", "max_num_seqs >= 100",
                 "enable_chunked_prefill or max_num_batched_tokens >= 8192",
                 "enable_chunked_prefill or max_num_seqs >= 1000", "block_size <= 8"):
        parse_constraint(rule, PARAMS)


def test_rules_that_cannot_hold_together_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"constraints 'max_num_seqs >= 100', 'max_num_seqs <= "
                       r"max_num_batched_tokens', 'max_num_batched_tokens <= 50': no config of "
                       "the space meets them all at once"):
        parse_constraints(["max_num_seqs >= 100", "max_num_seqs <= max_num_batched_tokens",
                           "max_num_batched_tokens <= 50"], PARAMS)


@pytest.mark.parametrize(("rule", "message"), [
    ("scheduling_policy <= 3", "'scheduling_policy' takes values that are not numbers"),
    ("max_num_seqs or max_num_batched_tokens >= 8", "the guard 'max_num_seqs' must be a bool"),
    ("max_num_seqs <= nope", "unknown parameter 'nope'"),
])
def test_rules_that_compare_nonsense_are_refused(rule: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_constraint(rule, PARAMS)


# ---- repair ------------------------------------------------------------------------------------
def test_a_repair_moves_the_other_side_when_one_side_would_leave_its_bounds() -> None:
    seqs = Param("max_num_seqs", "int", Layer.MEMORY_CONCURRENCY, low=16, high=256, default=64)
    tokens = Param("max_num_batched_tokens", "int", Layer.SCHEDULING, low=8, high=8192,
                   default=2048)
    space = SearchSpace.of([seqs, tokens], parse_constraints(
        ["max_num_seqs <= max_num_batched_tokens"], [seqs, tokens]))
    # the old repair set max_num_seqs to 10, below its low bound of 16
    assert space.repair({"max_num_seqs": 100, "max_num_batched_tokens": 10}) == {
        "max_num_seqs": 100, "max_num_batched_tokens": 100}


def test_a_repair_switches_the_guard_on_when_the_bound_is_out_of_reach() -> None:
    space = SearchSpace.of(PARAMS, parse_constraints(
        ["enable_chunked_prefill or max_num_seqs >= 1000"], PARAMS))
    repaired = space.repair(space.from_unit([0.0] * space.dims))
    assert repaired is not None and repaired["enable_chunked_prefill"] is True
    assert repaired["max_num_seqs"] == 8


def test_the_space_refuses_a_repair_that_leaves_the_bounds() -> None:
    old_style = Constraint("max_num_seqs >= 1000", lambda c: {**c, "max_num_seqs": 1000})
    space = SearchSpace.of([SEQS], [old_style])
    with pytest.raises(AssertionError, match=r"max_num_seqs = 1000, outside its values \[8, 128\]"):
        space.repair({"max_num_seqs": 64})
    sneaky = Constraint("eager", lambda c: {**c, "enforce_eager": True})
    with pytest.raises(AssertionError, match="enforce_eager = True, which is not a searched"):
        SearchSpace.of([SEQS, EAGER_OFF], [sneaky]).repair({"max_num_seqs": 64})


# ---- properties over random spaces and rules ---------------------------------------------------
@st.composite
def small_params(draw: st.DrawFn, *, floats: bool) -> list[Param]:
    """Two to four parameters ``p0..``; whole-number kinds with at most six values."""
    kinds = ["int", "log_int", "bool", "categorical", *(["float"] if floats else [])]
    out = []
    for index in range(draw(st.integers(2, 4))):
        kind = draw(st.sampled_from(kinds))
        light = draw(st.sampled_from([Light.SITUATIONAL] * 3 + [Light.FORBIDDEN,
                                                              Light.MUST_CHANGE]))
        low: float | None = None
        high: float | None = None
        choices: tuple[Any, ...] = ()
        if kind in ("int", "log_int"):
            low = draw(st.integers(1 if kind == "log_int" else -5, 20))
            high = low + draw(st.integers(0, 5))
            value: Any = draw(st.integers(int(low), int(high)))
        elif kind == "float":
            low = draw(st.integers(-50, 200)) / 10
            high = low + draw(st.integers(0, 100)) / 10
            value = low
        elif kind == "bool":
            value = draw(st.booleans())
        else:
            choices = tuple(draw(st.lists(st.integers(-5, 25), min_size=1, max_size=4,
                                          unique=True)))
            value = draw(st.sampled_from(choices))
        out.append(Param(f"p{index}", kind, Layer.SCHEDULING, light, low, high, choices,
                         default=value, required=value if light is Light.MUST_CHANGE else None))
    return out


@st.composite
def rules_for(draw: st.DrawFn, params: list[Param]) -> list[str]:
    bools = [p.name for p in params if p.kind == "bool"]
    out = []
    for _ in range(draw(st.integers(1, 3))):
        left = draw(st.sampled_from([p.name for p in params]))
        right = draw(st.one_of(st.sampled_from([p.name for p in params]),
                               st.integers(-8, 30).map(str)))
        rule = f"{left} {draw(st.sampled_from(['<=', '>=']))} {right}"
        if bools and draw(st.booleans()):
            rule = f"{draw(st.sampled_from(bools))} or {rule}"
        out.append(rule)
    return out


def holds(rule: str, config: dict[str, Any]) -> bool:
    """The rule's meaning, written independently of the module under test."""
    guard, _, body = rule.rpartition(" or ")
    if guard and bool(config.get(guard)):
        return True
    left, op, right = body.split()
    a, b = config.get(left), (config.get(right) if right.startswith("p") else float(right))
    if a is None or b is None:
        return True
    return bool(a <= b) if op == "<=" else bool(a >= b)


def every_config(params: list[Param]) -> list[dict[str, Any]]:
    def values(p: Param) -> tuple[Any, ...]:
        if p.light is not Light.SITUATIONAL:
            return (p.required if p.light is Light.MUST_CHANGE else p.default,)
        if p.kind in ("int", "log_int"):
            assert p.low is not None and p.high is not None
            return tuple(range(int(p.low), int(p.high) + 1))
        return p.values
    names = [p.name for p in params]
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(values(p) for p in params))]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_load_time_check_is_exact(data: st.DataObject) -> None:
    params = data.draw(small_params(floats=False))
    rules = data.draw(rules_for(params))
    possible = any(all(holds(r, c) for r in rules) for c in every_config(params))
    try:
        parse_constraints(rules, params)
    except ConfigError:
        assert not possible, (rules, params)
    else:
        assert possible, (rules, params)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_repairs_stay_inside_the_bounds_and_meet_every_rule(data: st.DataObject) -> None:
    params = data.draw(small_params(floats=True))
    rules = data.draw(rules_for(params))
    try:
        space = SearchSpace.of(params, parse_constraints(rules, params))
    except ConfigError:
        return  # refused at load: nothing is ever proposed
    for _ in range(5):
        point = data.draw(st.lists(st.floats(0, 1), min_size=space.dims, max_size=space.dims))
        config = space.from_unit(point)
        repaired = space.repair(config)
        if len(rules) == 1:
            assert repaired is not None, (rules, config)  # one possible rule always repairs
        if repaired is None:
            continue
        for p in params:
            if p.light is Light.SITUATIONAL:
                assert p.contains(repaired[p.name]), (p, repaired)
                if p.kind in ("int", "log_int"):
                    assert isinstance(repaired[p.name], int)
                if p.kind in ("bool", "categorical"):
                    assert any(repaired[p.name] == v and type(repaired[p.name]) is type(v)
                               for v in p.values)
            else:
                assert repaired.get(p.name) == config.get(p.name)
        assert all(holds(r, repaired) for r in rules), (rules, repaired)

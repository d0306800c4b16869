"""Canonical JSON: one text per meaning; refuses what would not hash stably."""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunegate.tuner.digest import _checked, canonical_json, digest, normalize
from tunegate.tuner.journal import encode_record


def test_key_order_and_whitespace_do_not_matter() -> None:
    a = {"b": [1, 2.5, None], "a": {"y": True, "x": "é"}}
    b = OrderedDict([("a", OrderedDict([("x", "é"), ("y", True)])), ("b", (1, 2.5, None))])
    assert canonical_json(a) == canonical_json(b) == (
        '{"a":{"x":"\\u00e9","y":true},"b":[1,2.5,null]}'
    )
    assert digest(a) == digest(b)


def test_floats_are_repr_stable_and_distinct_from_ints() -> None:
    assert canonical_json([0.1, 1e16, -0.0, 1.0]) == "[0.1,1e+16,-0.0,1.0]"
    assert digest({"x": 1}) != digest({"x": 1.0})
    assert digest({"x": 0.1 + 0.2}) != digest({"x": 0.3})


def test_numpy_scalars_become_plain_numbers() -> None:
    assert canonical_json({"n": np.int64(3), "f": np.float32(0.5)}) == '{"f":0.5,"n":3}'


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_refused_with_path(bad: float) -> None:
    with pytest.raises(ValueError, match=r"\$\.inputs\.sigma"):
        canonical_json({"inputs": {"sigma": bad}})


def test_non_string_keys_and_unknown_types_refused() -> None:
    with pytest.raises(ValueError, match="non-string key"):
        canonical_json({1: "a"})
    with pytest.raises(TypeError, match="set"):
        canonical_json({"a": {1, 2}})


def test_known_digest() -> None:
    # sha256(b'{"a":1}')
    assert digest({"a": 1}) == "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"


# The fast path (:func:`tunegate.tuner.digest._plain`) must give exactly what the checked walk
# gives: journals written before it must keep verifying, decisions keep their hashes.
LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                 st.floats(allow_nan=False, allow_infinity=False),
                 st.integers(-5, 5).map(np.int64), st.floats(-1, 1).map(np.float64))
TREE = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=4), inner, max_size=4)), max_leaves=30)


@given(TREE)
@settings(max_examples=300, deadline=None)
def test_the_fast_path_equals_the_checked_walk(value: object) -> None:
    fast, checked = normalize(value), _checked(value, "$")
    assert fast == checked
    assert json.dumps(fast) == json.dumps(checked)  # same types too (1 vs 1.0, -0.0)


@given(TREE, st.integers(1, 10**6), st.integers(0, 99), st.text(min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_journal_checksums_match_the_original_formula(value: object, seq: int, epoch: int,
                                                     type_: str) -> None:
    data = {"v": value}
    original = hashlib.sha256(canonical_json(
        {"seq": seq, "epoch": epoch, "type": type_, "data": data}).encode("ascii")).hexdigest()
    line = json.loads(encode_record(seq, epoch, type_, data))
    assert line["crc"] == original[:16]


def test_refusals_still_name_the_path_inside_plain_containers() -> None:
    with pytest.raises(ValueError, match=r"\$\.a\[1\]\.b is nan"):
        normalize({"a": [1, {"b": math.nan}]})
    with pytest.raises(ValueError, match=r"\$\.a\[0\] has the non-string key 1"):
        normalize({"a": [{1: 2}]})
    with pytest.raises(TypeError, match=r"\$\.a is a set"):
        normalize({"a": {1}})

"""Canonical JSON: one text per meaning; refuses what would not hash stably."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

from tunegate.tuner.digest import canonical_json, digest


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

"""DS2: true rates (eq. 1), the optimal parallelism (eq. 7 and 8) and the single-vertex reduction."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.ds2 import OperatorRates, ds2_parallelism, true_rate


def test_true_rate_is_observed_rate_over_useful_time() -> None:
    assert true_rate(7_000, 0.5) == 14_000  # 7,000 records in half a second of useful time
    assert true_rate(7_000, 0.0) is None  # undefined with W_u = 0 (eq. 1)


def test_wordcount_chain_by_hand() -> None:
    # Source 100k/s -> flatmap (selectivity 10) -> count. Hand computation with eq. 7 and 8:
    # flatmap: 2 instances, aggregated true rates 50k in / 500k out -> 25k per instance:
    #   pi = ceil(100k / 25k) = 4; optimal output = 10 * 100k = 1M/s.
    # count: 3 instances, aggregated true processing 300k -> 100k per instance: pi = ceil(1M / 100k) = 10.
    operators = [
        OperatorRates("flatmap", 2, 50_000, 500_000),
        OperatorRates("count", 3, 300_000, 0, ("flatmap",)),
    ]
    assert ds2_parallelism(operators, 100_000) == {"flatmap": 4, "count": 10}


def test_join_of_two_branches_sums_upstream_optimal_outputs() -> None:
    # Two maps read the source; a join takes both outputs: 30k * 0.5 + 30k * 1.0 = 45k in, 10k per instance.
    operators = [
        OperatorRates("left", 1, 20_000, 10_000),
        OperatorRates("right", 1, 40_000, 40_000),
        OperatorRates("join", 2, 20_000, 20_000, ("left", "right")),
    ]
    assert ds2_parallelism(operators, 30_000) == {"left": 2, "right": 1, "join": 5}


def test_upstream_out_of_order_is_rejected() -> None:
    with pytest.raises(ValueError, match="topological order"):
        ds2_parallelism([OperatorRates("b", 1, 1, 1, ("a",)), OperatorRates("a", 1, 1, 1)], 10)


@given(
    source=st.floats(1.0, 1e7, allow_nan=False),
    per_instance=st.floats(1.0, 1e6, allow_nan=False),
    parallelism=st.integers(1, 64),
)
def test_single_operator_is_the_smallest_parallelism_that_keeps_up(
    source: float, per_instance: float, parallelism: int
) -> None:
    op = OperatorRates("op", parallelism, per_instance * parallelism, per_instance * parallelism)
    pi = ds2_parallelism([op], source)["op"]
    # Property 1 and 2 of the paper under linear scaling: pi keeps up, pi - 1 does not.
    assert pi * per_instance >= source * (1 - 1e-9)
    assert pi == 1 or (pi - 1) * per_instance < source * (1 + 1e-9)
    assert pi == max(1, math.ceil(source / per_instance - 1e-9))

"""DS2: true rates (eq. 1), the optimal parallelism (eq. 7 and 8) and the single-vertex reduction."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import Ds2Policy
from planner.ds2 import OperatorRates, ds2_parallelism, mean_true_rate, true_rate
from tests.policies.conftest import CONFIG, snapshot


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


def test_single_vertex_policy_uses_the_mean_true_rate_per_worker() -> None:
    # Workers at 7,000/s with 50 % CPU and 9,000/s with 75 % CPU: true rates 14,000 and 12,000, mean 13,000.
    plan = snapshot(
        current=4,
        workload=40_000,
        throughput={"tm-0": 7_000, "tm-1": 9_000},
        worker_cpu={"tm-0": 0.5, "tm-1": 0.75},
    )
    assert mean_true_rate(plan.worker_throughput, plan.worker_cpu) == pytest.approx(13_000)
    decision = Ds2Policy().decide(plan, CONFIG)
    assert decision.target_parallelism == 4  # ceil(40,000 / 13,000) = 4
    faster = Ds2Policy().decide(snapshot(current=4, workload=60_000, throughput=plan.worker_throughput,
                                         worker_cpu=plan.worker_cpu), CONFIG)
    assert faster.target_parallelism == 5  # ceil(60,000 / 13,000) = 5, no stabilization: DS2 does not oscillate


def test_ds2_keeps_the_scale_out_without_useful_time() -> None:
    decision = Ds2Policy().decide(snapshot(throughput={"tm-0": 0.0}, worker_cpu={"tm-0": 0.0}), CONFIG)
    assert decision.target_parallelism == 4 and not decision.acted

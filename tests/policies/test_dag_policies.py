"""Justin (Algorithm 1) and QEScalor (OPRPM + QCESA) by hand, and DS2/Justin on the operator-DAG testbed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lab.dag import cache_hit_rate, run_dag_policy
from planner import spec
from planner.justin import OperatorMemoryState, justin_plan, memory_mb
from planner.qescalor import PerformanceModel, Provision, Sample, candidates, qcesa
from simulator.dag import DagTestbed


def state(**kwargs: object) -> OperatorMemoryState:
    base = {"name": "window", "stateful": True, "parallelism": 2, "memory_level": 0}
    return OperatorMemoryState(**{**base, **kwargs})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("op", "ds2", "parallelism", "level", "scaled_up"),
    [
        # Stateless: DS2's parallelism, managed memory removed (the paper's bottom).
        (state(name="map", stateful=False, memory_level=1), 5, 5, None, False),
        # DS2 keeps the parallelism: nothing to decide.
        (state(cache_hit_rate=0.2), 2, 2, 0, False),
        # Low hit rate: cancel the scale-out, one memory level up.
        (state(cache_hit_rate=0.5), 4, 2, 1, True),
        # Slow state access (above 1 ms) also counts as memory pressure.
        (state(cache_hit_rate=0.95, access_latency_ms=3.0), 4, 2, 1, True),
        # Good hit rate and latency: DS2's scale-out applies.
        (state(cache_hit_rate=0.9, access_latency_ms=0.2), 4, 4, 0, False),
        # Scaled up last time and it helped: another level instead of the scale-out.
        (state(memory_level=1, scaled_up_last=True, cache_hit_rate=0.7, previous_cache_hit_rate=0.5), 4, 2, 2, True),
        # Scaled up last time without improvement: roll back one level, DS2's parallelism.
        (state(memory_level=1, scaled_up_last=True, cache_hit_rate=0.5, previous_cache_hit_rate=0.5), 4, 4, 0, False),
        # m + 1 < maxLevel (3) fails at level 2: scale out instead.
        (state(memory_level=2, cache_hit_rate=0.5), 4, 4, 2, False),
    ],
)
def test_justin_algorithm_1(
    op: OperatorMemoryState, ds2: int, parallelism: int, level: int | None, scaled_up: bool
) -> None:
    plan = justin_plan({op.name: ds2}, [op])
    assert plan.parallelism[op.name] == parallelism
    assert plan.memory_level[op.name] == level
    assert plan.scaled_up[op.name] == scaled_up


def test_memory_levels_double_from_the_minimum() -> None:
    assert [memory_mb(level) for level in (0, 1, 2)] == [128, 256, 512]
    assert memory_mb(None) == 0


def test_justin_and_qescalor_refuse_the_single_vertex_job_by_name() -> None:
    for name in ("justin", "qescalor"):
        with pytest.raises(KeyError, match="DAG testbed"):
            spec(name).policy()


def test_candidates_cover_the_workload_without_needless_instances() -> None:
    perf = [1_000.0, 2_500.0]
    found = candidates(perf, 4_000, 4_000, max_instances=6)
    brute = [
        c
        for c in itertools.product(range(7), repeat=2)
        if sum(c) <= 6
        and sum(c) > 0
        and np.dot(c, perf) >= 4_000
        and np.dot(c, perf) - min(p for p, n in zip(perf, c) if n) < 4_000
    ]
    assert sorted(found) == sorted(brute)
    assert (4, 0) in found and (0, 2) in found and (2, 1) in found


def test_qcesa_keeps_instances_when_stopping_and_restarting_costs_more() -> None:
    provision = Provision("slot", 1, 512, price=1.0)
    perf = {"slot": 1_000.0}
    # A one-epoch dip: cheap switching follows it, expensive switching rides it out.
    cheap = qcesa(
        [2_500, 900, 2_500], [provision], perf, {"slot": 3}, startup_cost=0.1, shutdown_cost=0.1, max_instances=8
    )
    costly = qcesa(
        [2_500, 900, 2_500], [provision], perf, {"slot": 3}, startup_cost=5, shutdown_cost=5, max_instances=8
    )
    assert [p["slot"] for p in cheap] == [3, 1, 3]
    assert [p["slot"] for p in costly] == [3, 3, 3]


def test_qcesa_mixes_provisions_by_cost_per_performance() -> None:
    small, big = Provision("small", 1, 512, 1.0), Provision("big", 2, 2048, 1.5)
    plan = qcesa(
        [4_000], [small, big], {"small": 1_000, "big": 2_000}, {}, startup_cost=0, shutdown_cost=0, max_instances=8
    )
    assert plan == [{"small": 0, "big": 2}]  # 3.0 beats 4 small (4.0) and 2 small + 1 big (3.5)


def test_qcesa_rejects_an_uncoverable_workload() -> None:
    with pytest.raises(ValueError, match="cannot be covered"):
        qcesa([10_000], [Provision("s", 1, 512, 1)], {"s": 1_000}, {}, startup_cost=0, shutdown_cost=0, max_instances=4)


def test_random_forest_model_learns_a_nonlinear_provision_curve() -> None:
    def truth(cpu: float, memory: float) -> float:
        return 10_000 * cpu * min(1.0, (memory / 1024) ** 0.5)

    rng = np.random.default_rng(0)
    samples = [
        Sample(c, m, truth(c, m) * (1 + 0.02 * rng.standard_normal()))
        for c in (0.5, 1.0, 1.5, 2.0)
        for m in (256, 512, 1024, 2048)
    ]
    model = PerformanceModel(seed=1).fit(samples)
    for cpu, memory in ((1.0, 512), (1.5, 1024), (2.0, 2048)):
        assert model.predict(cpu, memory) == pytest.approx(truth(cpu, memory), rel=0.15)
    # More of either resource never predicts less along the sampled diagonal.
    diagonal = [model.predict(c, m) for c, m in ((0.5, 256), (1.0, 512), (1.5, 1024), (2.0, 2048))]
    assert diagonal == sorted(diagonal)
    with pytest.raises(ValueError, match="at least 2 samples"):
        PerformanceModel().fit(samples[:1])


def test_cache_hit_rate_grows_with_memory_and_stateless_has_none() -> None:
    testbed = DagTestbed()
    hits = [cache_hit_rate(testbed, 1, 2, 30_000, mb) for mb in (128, 256, 512, 4096)]
    assert all(a is not None and b is not None and a < b for a, b in zip(hits, hits[1:]))
    assert hits[-1] == pytest.approx(1.0)
    assert cache_hit_rate(testbed, 0, 2, 30_000, 128) is None


def test_on_the_testbed_ds2_sustains_the_rate_and_justin_trades_slots_for_memory() -> None:
    testbed = DagTestbed()
    ds2 = run_dag_policy(testbed, "ds2", rate=40_000, initial=(1, 1, 1), steps=4)
    justin = run_dag_policy(testbed, "justin", rate=40_000, initial=(1, 1, 1), steps=5)
    assert not ds2[0].sustains
    # DS2 jumps to a sustaining configuration in one step and stays there (no oscillation at this rate).
    assert ds2[1].sustains and len({s.parallelism for s in ds2[1:]}) == 1
    # Justin first raises memory (the window state spills), then scales out less than DS2 did.
    assert justin[1].memory_mb > justin[0].memory_mb and justin[1].parallelism == justin[0].parallelism
    assert justin[-1].sustains
    assert justin[-1].task_slots < ds2[-1].task_slots
    assert justin[-1].cache_hit_rate > ds2[-1].cache_hit_rate

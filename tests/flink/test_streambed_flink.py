"""StreamBed on the real Flink cluster: ``perdix capacity-plan --testbed flink`` writes a prior the agent can load.

The session cluster of tests/fixtures/flink.py (three one-slot TaskManagers) and a real Prometheus
scraping it each second are the existing testbed cluster the command is pointed at (``--rest-url``,
``--prometheus``). After a 20-s warm-up of the cluster, the plan explores 1-2 slots in three
testbed runs of the trace job (chained shape, 2000 records/s per slot, even partitions), each a
binary search over fresh submissions at fixed rates. Then:

- the capacity model file is valid, loads as the agent's prior, and its capacity at 1 slot is within
  10 % of the configured per-slot capacity (a saturated slot carries 96-99 % of it on the shared
  2-core machine: Flink's own work and late wake-ups), and at 2 slots within 10 % of twice that;
- the sustained criterion tells the two sides apart on the real job: 15 % above the 1-slot MST the
  backlog grows by more than 1 % of the rate, 15 % below it stays flat.

Everything missing (Flink, Java, Prometheus) fails the test with the reason; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.flink import trace_job
from lab.flink.prometheus import PrometheusClient
from lab.flink.testbed import FlinkTestbed, FlinkTestbedSettings, estimator_settings
from models.streambed import is_sustainable, load_capacity_prior, read_capacity_model
from tests.fixtures.flink import FlinkCluster
from tests.fixtures.prometheus import PrometheusServer

pytestmark = pytest.mark.e2e

CAPACITY = 2000.0
"""Records/s one slot of the trace job carries (its --capacity)."""
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def prometheus(flink_cluster: FlinkCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus scraping the JobManager and every TaskManager each second."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-streambed"), flink_cluster.metrics_targets)
    try:
        server.start()
        server.wait_for(f"count(up == 1) == {len(flink_cluster.metrics_targets)}", timeout_s=30)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def plan(flink_cluster: FlinkCluster, prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The capacity-plan command against the session cluster; the model file it wrote."""
    trace_job.build_jar(home=flink_cluster.home)  # fails with the reason when javac or Flink's jars are missing
    out = tmp_path_factory.mktemp("streambed") / "capacity.json"
    result = CliRunner().invoke(
        app,
        [
            "capacity-plan",
            "--testbed",
            "flink",
            "--rest-url",
            flink_cluster.rest_url,
            "--prometheus",
            prometheus.url,
            "--min-slots",
            "1",
            "--max-slots",
            "2",
            "--max-runs",
            "3",
            "--capacity-per-slot",
            f"{CAPACITY:g}",
            "--measure-s",
            "6",
            "--rampup-s",
            "2",
            "--probes",
            "3",
            "--cluster-warmup-s",
            "20",
            "--target-rate",
            "10000",
            "--max-scale-out",
            "4",
            "--out",
            str(out),
        ],
    )
    print(result.output)
    assert result.exit_code == 0, result.output
    return out


def test_the_plan_writes_a_prior_whose_one_slot_capacity_is_the_configured_one(plan: Path) -> None:
    model = read_capacity_model(plan)
    assert model.job == "perdix-streambed" and model.testbed_runs == 3 and len(model.observations) == 3
    assert {o["task_slots"] for o in model.observations} == {1, 2}
    assert all(o["explored"] for o in model.observations)
    # Two budgets cannot tell the surrogate families apart: the line through them is kept.
    assert model.surrogate.family == "linear" and model.validation["families_identifiable"] is False
    assert model.extra["testbed"]["kind"] == "flink" and model.memory_mb == model.extra["testbed"]["memory_mb_per_slot"]
    prior = load_capacity_prior(plan)
    assert sorted(prior) == [1, 2, 3, 4]
    print(
        f"capacities: {', '.join(f'{n}: {c:,.0f}' for n, c in prior.items())}; "
        f"runs: {[(o['task_slots'], round(o['capacity'])) for o in model.observations]}"
    )
    assert abs(prior[1] - CAPACITY) <= TOLERANCE * CAPACITY, prior
    assert abs(prior[2] - 2 * CAPACITY) <= TOLERANCE * 2 * CAPACITY, prior
    assert prior[1] < prior[2] < prior[3] < prior[4]


def test_the_backlog_tells_a_sustained_rate_from_an_overload(
    flink_cluster: FlinkCluster, prometheus: PrometheusServer, plan: Path
) -> None:
    mst = next(o["capacity"] for o in read_capacity_model(plan).observations if o["task_slots"] == 1)
    settings = estimator_settings(rampup_s=2, measure_s=6)
    bed = FlinkTestbed(
        flink_cluster.rest_url, PrometheusClient(prometheus.url), FlinkTestbedSettings(capacity_per_slot=CAPACITY)
    )
    try:
        run = bed.deploy((1,), bed.memory_mb)
        verdicts = {}
        for factor in (1.15, 0.85):
            run.set_rate(factor * mst)
            run.advance(settings.rampup_s + settings.observe_s)
            measured = run.measure(settings.observe_s)
            verdicts[factor] = is_sustainable(measured, factor * mst, settings)
            print(
                f"{factor:.2f} x MST ({factor * mst:,.0f}/s): read {measured.achieved_rate:,.0f}/s, "
                f"backlog {measured.lag_growth:+,.1f}/s over {measured.backlog_samples} samples"
            )
            if factor > 1:
                assert measured.lag_growth > 0.05 * factor * mst, measured
            else:
                assert abs(measured.lag_growth) < 0.01 * factor * mst, measured
        assert verdicts == {1.15: False, 0.85: True}
    finally:
        bed.close()

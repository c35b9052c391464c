"""Daedalus on real Flink with a source that reports no backlog: the default queries still decide.

Flink's own rate-limited ``DataGeneratorSource`` reports no FLIP-33 ``pendingRecords`` (nor do datagen
tables or connectors without FLIP-33). With a workload query that needed the backlog's growth, every round
of such a job was a gap and Perdix never decided. The default workload is now what the sources read plus
the backlog's growth *where there is one*. Here ``perdix.jobs.GeneratorJob`` (the generator into the costly
map, 2,000 records/s per slot, chained in one task) produces 1,500 records/s and starts on all three slots;
``perdix run`` with the shipped queries and the ``daedalus`` policy must read the workload, scale in, keep
carrying the 1,500 records/s, and measure the rescale's recovery (with no backlog, workload − throughput is
zero up to rounding, and the watch ends once the job runs again instead of calling the recovery overdue).
About a minute and a half on the shared cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from lab.flink import trace_job
from lab.flink.harness import RealFlink, Rescale, agent_settings, log_time, rescales_from_log
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.test_e2e_daedalus import RATE_WINDOW_S, time_knobs

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-generator-e2e"
RATE, CAPACITY = 1500.0, 2000.0
"""Records/s the generator produces (all subtasks); records/s one slot's map carries. One slot carries the
rate but would not recover a failure within the target (500/s to spare); two do."""
SOURCE_RATE = 'sum(rate(flink_taskmanager_job_task_operator_numRecordsOut{operator_name="Source:_generator"}[10s]))'


@dataclass
class Scenario:
    events: list[dict[str, Any]]
    rescales: list[Rescale]
    settled_rate: float
    """The source's read rate over the last 10 s of the run, records/s."""
    running: int
    """Subtasks of the job's vertex running at the end (REST API)."""
    tail: str


@pytest.fixture(scope="module")
def scenario(flink_cluster: FlinkCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The generator on three slots, ``perdix run`` until it scaled in and ran 25 s more, then everything stopped."""
    workdir = tmp_path_factory.mktemp("generator")
    prometheus = PrometheusServer(workdir / "prometheus", flink_cluster.metrics_targets).start()
    harness = RealFlink(flink_cluster, prometheus, trace_job.build_jar(home=flink_cluster.home))
    job_id = trace_job.submit_generator(
        flink_cluster.rest_url,
        job_name=JOB_NAME,
        rate_per_s=RATE,
        capacity_per_subtask=CAPACITY,
        parallelism=3,
    )
    flink_cluster.jobs.append(job_id)
    try:
        harness.wait_scraped()
        settings = agent_settings(
            prometheus_url=prometheus.url,
            rest_url=flink_cluster.rest_url,
            job_name=JOB_NAME,
            knowledge_path=workdir / "knowledge.json",
            # An in-place rescale stops the job for about a second (README, "The smallest configuration").
            downtime_rescale_prior_s=2.0,
            **time_knobs(),
        )
        agent = harness.perdix(workdir / "agent", settings)
        scaled_in = agent.wait_for(
            lambda e: e.get("event") == "rescale" and e["to"] < e["from"],
            timeout_s=120,
            what="a scale-in of the over-provisioned job",
        )
        time.sleep(25.0)  # rounds after the rescale: the recovery watch, the rate at the new scale-out
        answer = prometheus.query(SOURCE_RATE)
        settled = float(answer[0]["value"][1]) if answer else float("nan")
        details = poll(lambda: flink_cluster.job(job_id), timeout_s=10, what="the job's details")
        running = min(v["tasks"]["RUNNING"] for v in details["vertices"])
        agent.stop()
        events = agent.events()
        print(f"\nscale-in: {scaled_in}\nsettled read rate {settled:.0f}/s at {running} subtasks")
        yield Scenario(events, rescales_from_log(events), settled, running, agent.tail(40))
    finally:
        harness.stop()
        prometheus.stop()
        flink_cluster.cancel(job_id)


def test_every_round_reads_the_workload_from_what_the_sources_read(scenario: Scenario) -> None:
    rounds = [e for e in scenario.events if e.get("event") == "loop"]
    deciding = [e for e in rounds if e.get("outcome") == "completed" and e.get("workload_avg") is not None]
    # The first round may come before the job's first rate window; every later one has the workload.
    assert len(deciding) >= len(rounds) - 1 and len(rounds) >= 10, scenario.tail
    # Once the rate window has passed the scale-in's restart (the generator does not make up the records of the
    # second it stopped, so a window over the restart reads up to a tenth low), the workload is the rate produced.
    settled_from = scenario.rescales[-1].confirmed_at + RATE_WINDOW_S + 1 if scenario.rescales else 0.0
    steady = [float(e["workload_avg"]) for e in deciding if log_time(e) >= settled_from]
    assert len(steady) >= 2 and all(abs(w - RATE) <= 0.05 * RATE for w in steady), (steady, scenario.tail)
    # The generator reports no backlog: the lag queries are named gaps, the workload is not one after the start.
    gaps = {e["series"] for e in scenario.events if e.get("event") == "monitor.gap" and e.get("problem") == "empty"}
    assert {"consumer_lag", "worker_backlog"} <= gaps
    late_gaps = {e["series"] for e in scenario.events[len(scenario.events) // 2 :] if e.get("event") == "monitor.gap"}
    assert "workload" not in late_gaps, scenario.tail


def test_the_over_provisioned_job_is_scaled_in_and_still_carries_its_workload(scenario: Scenario) -> None:
    assert scenario.rescales, scenario.tail
    first = scenario.rescales[0]
    assert first.from_parallelism == 3 and first.to_parallelism == 2, (first, scenario.tail)
    assert scenario.running == scenario.rescales[-1].to_parallelism
    assert abs(scenario.settled_rate - RATE) <= 0.05 * RATE, (scenario.settled_rate, scenario.tail)


def test_the_watch_measures_the_recovery_instead_of_calling_it_overdue(scenario: Scenario) -> None:
    measured = [e for e in scenario.events if e.get("event") == "recovery.measured"]
    rescale_at = scenario.rescales[0].requested_at
    assert any(abs(float(e["started_at"]) - rescale_at) < 5.0 for e in measured), scenario.tail
    # Nor was the job's own start (read as a parallelism that changed outside Perdix) held until the target.
    assert not [e for e in scenario.events if e.get("event") == "recovery.overdue"], scenario.tail
    holding = [e for e in scenario.events if e.get("event") == "loop" and e.get("recovering")]
    assert len(holding) <= 3, (len(holding), scenario.tail)

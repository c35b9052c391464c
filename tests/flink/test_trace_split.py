"""The trace job's split shape on a real Flink cluster: per-vertex rescale, a TaskManager crash, exactly once.

source | rebalance | costly map | hash | verifier, three vertices in one slot-sharing group: the map
starts at 2 subtasks beside one source and one verifier subtask (two slots), is rescaled alone to 3
through the flink-rest scaler, and then one TaskManager is killed (SIGKILL, by its pid) and replaced.
The rebalance edge reorders each partition's records on their way to the verifier, so its
out-of-order bookkeeping is exercised; the crash replays from the last checkpoint. Once production
stops and the job drains, every produced record was verified exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent.execute.flink_rest import FlinkRestScaler
from agent.settings import ScaleTargetSettings
from lab.flink import trace_job
from lab.flink.promql import TraceJobQueries
from lab.flink.trace_job import TraceJobOptions
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.test_trace_source import query_at, wait_until

pytestmark = pytest.mark.e2e

RATE = 5000.0
CAPACITY = 4000.0
END_S = 40.0


@pytest.fixture(scope="module")
def prometheus(flink_cluster: FlinkCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The real Prometheus scraping the cluster's processes each second (the replacement TaskManager too)."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-split"), flink_cluster.metrics_targets)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def vertices(cluster: FlinkCluster, job_id: str) -> dict[str, tuple[int, int]]:
    """Vertex name -> (parallelism, running subtasks), straight from the REST API."""
    details = cluster.job(job_id) or {}
    return {v["name"]: (v["parallelism"], v["tasks"]["RUNNING"]) for v in details.get("vertices") or []}


def test_per_vertex_rescale_and_a_crash_lose_and_duplicate_nothing(
    flink_cluster: FlinkCluster, prometheus: PrometheusServer
) -> None:
    epoch_ms = int(time.time() * 1000) + 3000
    options = TraceJobOptions(
        job_name="perdix-trace-split",
        shape="split",
        rate_per_s=RATE,
        capacity_per_subtask=CAPACITY,
        seed=5,
        checkpoint_interval_s=1.0,
        parallelism=1,
        cost_parallelism=2,
        epoch_ms=epoch_ms,
        end_s=END_S,
    )
    job = trace_job.submit(flink_cluster.rest_url, options, jar=trace_job.build_jar(home=flink_cluster.home))
    epoch = epoch_ms / 1000
    try:
        assert vertices(flink_cluster, job.job_id) == {
            "Source: log": (1, 1),
            "cost": (2, 2),
            "verify -> discard: Writer": (1, 1),
        }
        scaler = FlinkRestScaler(
            ScaleTargetSettings(
                kind="flink-rest", rest_url=flink_cluster.rest_url, job=job.job_id, request_timeout_s=5.0
            ),
            confirm_timeout_s=60.0,
            poll_interval_s=0.2,
        )
        wait_until(flink_cluster, job, epoch + 8)
        result = scaler.rescale_vertices({"cost": 3}, reasons=("test",), dry_run=False)
        assert result.confirmed == 3
        assert vertices(flink_cluster, job.job_id)["cost"] == (3, 3)

        wait_until(flink_cluster, job, epoch + 16)
        victim = next(p for p in flink_cluster.processes if p.role.startswith("taskmanager-"))
        crashed_at = time.time()
        flink_cluster.kill(victim.role)
        replacement = flink_cluster.add_taskmanager()
        prometheus.targets = flink_cluster.metrics_targets
        prometheus.write_config()  # the replacement's reporter is a new target; Prometheus rereads on SIGHUP
        assert prometheus.process is not None
        prometheus.process.send_signal(1)

        def failures() -> list[Any]:
            history = trace_job.rest_get(f"{flink_cluster.rest_url}/jobs/{job.job_id}/exceptions") or {}
            return list(history.get("exceptionHistory", {}).get("entries") or [])

        def restored() -> dict[str, tuple[int, int]] | None:
            # Back means: the JobManager noticed the crash (a failure in the job's history) and every task runs
            # again at cost parallelism 3. Right after the kill the job still reads RUNNING at 3 until the
            # lost TaskManager is noticed, which is no restart at all.
            flink_cluster.check_alive()
            details = flink_cluster.job(job.job_id) or {}
            seen = vertices(flink_cluster, job.job_id)
            running = details.get("state") == "RUNNING" and all(p == r for p, r in seen.values())
            return seen if running and seen.get("cost") == (3, 3) and failures() else None

        poll(restored, timeout_s=90, interval_s=0.5, what="the job noticed the crash and back at cost parallelism 3")
        recovered_s = time.time() - crashed_at
        print(f"crash of {victim.role} -> {replacement.role}; back at 3 after {recovered_s:.1f} s")

        wait_until(flink_cluster, job, epoch + END_S)
        expected = job.schedule().produced_all(epoch_ms + int(END_S * 1000) + 1)

        seen_counts: list[trace_job.JobCounts] = []

        def drained() -> trace_job.JobCounts | None:
            # Drained is also nothing ahead of a gap. The verifier's gauges are read one after another while it
            # runs, so one read can hold the last gap's records both ahead and verified (197 ahead of 199,995
            # verified of 199,995 once, beside the test suite); a double count would never settle to this.
            counts = trace_job.read_counts(flink_cluster.rest_url, job.job_id)
            seen_counts[:] = [counts]
            settled = counts.pending == 0 and counts.verified == expected and counts.ahead == 0
            return counts if settled else None

        # The crash's replay drains at the map's capacity: slower when other work shares the two cores.
        try:
            counts = poll(drained, timeout_s=180, interval_s=1.0, what=f"{expected} records verified")
        except (AssertionError, TimeoutError) as exc:
            details = flink_cluster.job(job.job_id) or {}
            raise AssertionError(
                f"{exc}; last counts: {seen_counts}; job {details.get('state')}, vertices "
                f"{vertices(flink_cluster, job.job_id)}, {len(failures())} failures in its history"
            ) from None
        assert (counts.duplicates, counts.lost) == (0, 0), counts
        # The rebalance did reorder partitions on their way to the verifier.
        accounting = TraceJobQueries(job=f'job_id="{job.job_id}"')
        ahead = query_at(prometheus, f"max_over_time({accounting.verifier('aheadRecords')}[2m:1s])", time.time())
        print(f"verified {counts.verified} of {expected}; most records ahead of a gap at once: {ahead[0]['value'][1]}")
        assert float(ahead[0]["value"][1]) > 0
    finally:
        flink_cluster.cancel(job.job_id)

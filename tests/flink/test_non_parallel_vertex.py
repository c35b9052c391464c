"""The flink-rest scaler on a job with a non-parallel operator, on real Flink.

A ``windowAll``, a global aggregate or any operator given max parallelism 1 makes a vertex Flink cannot
scale: its REST ``maxParallelism`` is 1. The scaler refused every scale-out of such a job ("max
parallelism 1, below the target"), so Perdix could never scale it; a job-wide rescale now takes each
vertex to the target or to its own max parallelism, whichever is lower, as Flink's own autoscaler does.
"""

from __future__ import annotations

import pytest

from agent.execute.flink_rest import FlinkRestScaler
from agent.ports import ScalerError
from agent.settings import ScaleTargetSettings
from lab.flink import trace_job
from lab.flink.trace_job import TraceJobOptions
from tests.fixtures.flink import FlinkCluster
from tests.flink.test_trace_split import vertices

pytestmark = pytest.mark.e2e


def test_a_job_wide_rescale_keeps_a_non_parallel_vertex_at_one(flink_cluster: FlinkCluster) -> None:
    options = TraceJobOptions(
        job_name="perdix-non-parallel",
        rate_per_s=2000.0,
        capacity_per_subtask=4000.0,
        seed=3,
        checkpoint_interval_s=1.0,
        parallelism=1,
        verify_parallelism=1,
        verify_max_parallelism=1,
    )
    job = trace_job.submit(flink_cluster.rest_url, options, jar=trace_job.build_jar(home=flink_cluster.home))
    flink_cluster.jobs.append(job.job_id)
    try:
        settings = ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url, job=job.job_id)
        scaler = FlinkRestScaler(settings, confirm_timeout_s=60.0, poll_interval_s=0.5)
        status = scaler.job_state()
        assert {v.name: v.max_parallelism for v in status.vertices} == {
            "Source: log -> cost": 128,
            "verify -> discard: Writer": 1,
        }, status

        result = scaler.rescale(2, reasons=("scale out past the non-parallel verifier",), dry_run=False)

        assert (result.requested, result.confirmed) == (2, 2), result
        assert result.downtime_s is not None, result
        assert vertices(flink_cluster, job.job_id) == {
            "Source: log -> cost": (2, 2),
            "verify -> discard: Writer": (1, 1),
        }
        # A scale-out past what no vertex can take is still refused, naming the job's limit.
        with pytest.raises(ScalerError, match="max parallelism"):
            scaler.rescale(status.vertices[0].max_parallelism + 1, reasons=("too far",), dry_run=False)
    finally:
        flink_cluster.cancel(job.job_id)

"""The flink-rest scaler on a job with more readers than source splits, on real Flink.

Flink's ``DataGeneratorSource`` cuts its sequence into as many splits as the job's parallelism at the first
start and restores them from the checkpoint: a job started at 1 and rescaled to 3 runs two readers that find
no split and FINISH (bounded sources and sources with fewer partitions than readers do the same). The
scaler waited for every subtask to be RUNNING, so such a rescale was "confirmed" only at its timeout.
"""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from agent.execute.flink_rest import FlinkRestScaler
from agent.settings import ScaleTargetSettings
from lab.flink import trace_job
from lab.flink.cluster import rest_get
from tests.fixtures.flink import FlinkCluster, poll

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-generator-splits"
RATE, CAPACITY = 1500.0, 2000.0


def test_a_rescale_past_the_generators_splits_is_confirmed_when_the_extra_readers_finish(
    flink_cluster: FlinkCluster,
) -> None:
    """Started at 1, the generator keeps one split: at 3 two readers run, find none and FINISH. The scaler
    confirms the rescale once every subtask has run (and measures its downtime) instead of waiting for
    subtasks that never run again until its confirm timeout, which held Perdix's loop for two minutes."""
    job_id = trace_job.submit_generator(
        flink_cluster.rest_url,
        job_name=JOB_NAME,
        rate_per_s=RATE,
        capacity_per_subtask=CAPACITY,
        parallelism=1,
        checkpoint_interval_s=1.0,
    )
    flink_cluster.jobs.append(job_id)
    try:
        poll(
            lambda: (
                ((rest_get(f"{flink_cluster.rest_url}/jobs/{job_id}/checkpoints") or {}).get("counts") or {}).get(
                    "completed", 0
                )
                > 0
            ),
            timeout_s=30,
            what="a first checkpoint (the enumerator's one split in it)",
        )
        settings = ScaleTargetSettings(kind="flink-rest", rest_url=flink_cluster.rest_url, job=job_id)
        # Polled every 2 s: the extra readers finish milliseconds after they run, so the scaler mostly reads them
        # FINISHED while it confirms; else (or one of them only) its next look at the job sees them.
        scaler = FlinkRestScaler(settings, confirm_timeout_s=60.0, poll_interval_s=2.0)
        started = time.monotonic()
        with capture_logs() as logs:
            result = scaler.rescale(3, reasons=("past the splits",), dry_run=False)
            took = time.monotonic() - started
            poll(
                lambda: any(v["tasks"]["FINISHED"] == 2 for v in (flink_cluster.job(job_id) or {}).get("vertices", [])),
                timeout_s=10,
                what="the two readers without a split FINISHED (else the case is not exercised)",
            )
            scaler.current_parallelism()  # the next round's look at the job, if the confirmation came first
        assert (result.confirmed, result.downtime_s is not None) == (3, True), result
        assert took < 30.0, f"confirmed after {took:.1f} s"
        # And the operator is told why the extra readers do nothing.
        assert any(e["event"] == "rescale.subtasks_finished" and e["finished"] == 2 for e in logs), logs
    finally:
        flink_cluster.cancel(job_id)

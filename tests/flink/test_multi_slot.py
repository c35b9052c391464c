"""Daedalus on a real Flink cluster of one TaskManager with three slots, every setting at its default.

A session cluster is often one TaskManager with several slots. With the worker named by its TaskManager
(``tm_id``, the old default) the three subtasks of the job were one worker, the scale-out three: the capacity
at the current scale-out was never known and every round kept it ("capacity at the current scale-out 3
unknown"), so Perdix never decided. The default worker is now the parallel instance (``subtask_index``):
here the generator job, over-provisioned at three slots for its 1,500 records/s (2,000 a slot), is scaled in.
``max_parallelism`` is left at its default (16): the agent plans within the cluster's three slots, which the
scale target reads from the REST API each round. About a minute and a half, with a cluster of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.flink import trace_job
from lab.flink.harness import RealFlink, agent_settings
from tests.flink.test_e2e_daedalus import time_knobs

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-multi-slot"
RATE, CAPACITY = 1500.0, 2000.0


def test_one_taskmanager_with_three_slots_is_scaled_in(tmp_path: Path) -> None:
    # A cluster of its own: one TaskManager with three slots (the shared one has three one-slot TaskManagers).
    with RealFlink.start(
        tmp_path,
        taskmanagers=1,
        extra_config={"taskmanager.numberOfTaskSlots": 3, "taskmanager.memory.process.size": "1400m"},
    ) as harness:
        job_id = trace_job.submit_generator(
            harness.cluster.rest_url,
            job_name=JOB_NAME,
            rate_per_s=RATE,
            capacity_per_subtask=CAPACITY,
            parallelism=3,
        )
        harness.cluster.jobs.append(job_id)
        # max_parallelism stays at its default (16): the agent plans within the cluster's three slots by itself.
        knobs = {key: value for key, value in time_knobs().items() if key != "max_parallelism"}
        settings = agent_settings(
            prometheus_url=harness.prometheus.url,
            rest_url=harness.cluster.rest_url,
            job_name=JOB_NAME,
            knowledge_path=tmp_path / "knowledge.json",
            downtime_rescale_prior_s=2.0,
            **knobs,
        )
        assert "worker_label" not in settings["prometheus"] and "max_parallelism" not in settings  # the defaults
        agent = harness.perdix(tmp_path / "agent", settings)
        scaled_in = agent.wait_for(
            lambda e: e.get("event") == "rescale" and e["to"] < e["from"],
            timeout_s=120,
            what="a scale-in of the over-provisioned job on one TaskManager",
        )
        agent.stop()
        rounds = [e for e in agent.events() if e.get("event") == "loop" and e.get("outcome") == "completed"]
        known = [e for e in rounds if e.get("capacity") is not None]
        assert scaled_in["from"] == 3 and scaled_in["to"] >= 1, scaled_in
        capped = [e for e in agent.events() if e.get("event") == "planner.capped"]
        assert capped and capped[0]["max_parallelism"] == 3 and capped[0]["configured"] == 16, capped
        assert all(e["to"] <= 3 for e in agent.events() if e.get("event") == "rescale")
        # The rounds that had a window of data knew the capacity: 2,000/s a slot, not a TaskManager's three slots'
        # (a busy-time estimate reads low at low load, by up to 17 % on this cluster: docs/flink-metrics.md; with the
        # rest of the suite beside it on two cores it read further off, so the band is half to one and a half).
        per_slot = [round(e["capacity"] / e["parallelism"]) for e in known]
        assert per_slot and all(0.5 * CAPACITY < c < 1.5 * CAPACITY for c in per_slot), per_slot

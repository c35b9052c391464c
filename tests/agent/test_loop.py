"""The agent loop on the simulated job: scale-out on a step, dry-run, restart from knowledge, fail-soft."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.knowledge.file import FileKnowledgeStore
from agent.observation import Observation
from agent.ports import MonitorError
from lab.replay import MemoryKnowledgeStore, Replay, ReplayError
from lab.settings import LabSettings, load_lab_settings
from simulator import Trace

STEP_AT_S = 2400


def step_trace(low: float = 45_000, high: float = 95_000, seconds: int = 4 * 3600) -> Trace:
    """A flat workload that steps up sharply at STEP_AT_S."""
    times = np.array([0.0, STEP_AT_S - 1.0, STEP_AT_S, float(seconds)])
    return Trace("step", times, np.array([low, low, high, high]))


def make_settings(**overrides: Any) -> LabSettings:
    base: dict[str, Any] = {"simulator.initial_parallelism": 6, "max_parallelism": 16, "target_recovery_time_s": 300}
    base.update(overrides)
    return load_lab_settings(None, base)


def test_step_up_is_followed_by_a_scale_out_within_two_loops_and_the_lag_recovers() -> None:
    settings = make_settings()
    run = Replay(step_trace(), settings, hours=1.5)
    run.run()
    executed = [(t, n) for t, n, dry in run.scaler.requests if not dry]
    after_step = [(t, n) for t, n in executed if t >= STEP_AT_S]
    assert after_step, f"no rescale after the step; requests: {run.scaler.requests}"
    first_t, first_n = after_step[0]
    assert first_t <= STEP_AT_S + 2 * settings.loop_interval_s
    assert run.job.true_capacity(first_n) > 95_000
    # The lag built up by the step and the rescale is worked off within the target recovery time.
    window = run.job.window(first_t, first_t + int(settings.target_recovery_time_s))
    assert window.lag.min() < 95_000  # back below one second of input
    summary = run.result().summary
    assert summary["records_lost"] == 0
    assert summary["slo_misses"] == 0


def test_dry_run_never_changes_the_job_but_logs_proposals() -> None:
    settings = make_settings(dry_run=True)
    run = Replay(step_trace(), settings, hours=1.5)
    run.run()
    parallelism = run.job.window(0, run.job.recorded_seconds).parallelism
    assert set(parallelism.tolist()) == {6}
    assert run.job.restarts == []
    proposals = [r for r in run.scaler.requests if r[2]]
    assert proposals and all(dry for _, _, dry in run.scaler.requests)
    assert max(n for _, n, _ in proposals) > 6


def test_restarted_agent_continues_from_its_knowledge_without_a_duplicate_rescale(tmp_path: Path) -> None:
    settings = make_settings()
    store = FileKnowledgeStore(tmp_path / "knowledge.json")
    run = Replay(step_trace(), settings, hours=1.5, knowledge=store)
    run.run(until_s=STEP_AT_S + 2 * 60)  # the scale-out happened just now
    executed = [r for r in run.scaler.requests if not r[2]]
    assert executed, "expected a rescale right after the step"
    capacities_before = run.agent.analyzer.observed_scale_outs()

    run.agent = run.start_agent()  # kill -9 and restart: only the knowledge file survives
    assert run.agent.last_rescale_at == executed[-1][0]
    assert run.agent.analyzer.observed_scale_outs() == capacities_before
    # Every round up to the end of the restored grace period (the boundary round may act again).
    run.run(until_s=int(executed[-1][0] + settings.grace_period_s) - 1)
    assert len(run.rounds) > 3
    assert [r for r in run.scaler.requests if not r[2]] == executed  # nothing new inside the grace period


class CountingStore(MemoryKnowledgeStore):
    """Keeps the documents and when each was written; the first write from ``fail_from`` on fails."""

    def __init__(self, fail_from: float) -> None:
        super().__init__()
        self.saved_at: list[float] = []
        self.failed_at: float | None = None
        self.fail_from = fail_from

    def save(self, document: dict[str, Any]) -> None:
        now = document["loop"]["last_round_at"]
        if self.failed_at is None and now >= self.fail_from:
            self.failed_at = now
            raise OSError("disk full")
        self.saved_at.append(now)
        super().save(document)


def test_a_fast_loop_writes_its_knowledge_about_once_a_minute_and_at_once_after_a_rescale() -> None:
    settings = make_settings(loop_interval_s=15.0)
    store = CountingStore(fail_from=STEP_AT_S - 600.0)
    run = Replay(step_trace(), settings, hours=1.0, knowledge=store)
    run.run()
    rescaled = {r.now for r in run.rounds if r.rescaled_to is not None}
    assert rescaled, "the step should have been met by a rescale"
    assert rescaled <= set(store.saved_at), "a round that rescaled writes at once"
    assert store.failed_at is not None and store.failed_at + 15.0 in store.saved_at, (
        "a failed write is retried next round"
    )
    assert np.diff(sorted([*store.saved_at, store.failed_at])).max() <= 60.0, "a write attempt at least once a minute"
    assert len(store.saved_at) < len(run.rounds) / 3, "not every 15-s round"
    reported = {r.now: r.knowledge for r in run.rounds if r.knowledge is not None}
    assert set(reported) == set(store.saved_at) | {store.failed_at}, "a round says whether it wrote"
    assert reported[store.failed_at].failure == "store"


def test_corrupt_or_future_knowledge_is_moved_aside_and_the_agent_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.json"
    for content in ("{not json", json.dumps({"version": 99, "loop": {}})):
        path.write_text(content)
        run = Replay(step_trace(), make_settings(), hours=0.5, knowledge=FileKnowledgeStore(path))
        assert run.agent.last_rescale_at is None
        moved = sorted(tmp_path.glob("knowledge.json.bad-*"))
        assert moved and moved[-1].read_text() == content
    run.run(until_s=120)
    assert json.loads(path.read_text())["version"] == 1


class BrokenMonitor:
    """A monitor that fails for a while (Prometheus down), then works again."""

    def __init__(self, inner: Any, broken_until: float) -> None:
        self.inner, self.broken_until = inner, broken_until

    def observe(self, *, since: float, now: float) -> Observation:
        if now <= self.broken_until:
            raise MonitorError("connection refused")
        return self.inner.observe(since=since, now=now)


def test_failed_monitor_never_crashes_the_loop_and_never_rescales() -> None:
    settings = make_settings()
    run = Replay(step_trace(), settings, hours=1.5)
    run.agent.monitor = BrokenMonitor(run.monitor, broken_until=STEP_AT_S + 600)
    run.run(until_s=STEP_AT_S + 600)
    assert all(r.skipped and r.skipped.startswith("monitor failed") for r in run.rounds)
    assert run.scaler.requests == []
    run.run(until_s=STEP_AT_S + 900)  # back: the overload is seen and acted on
    assert [n for _, n, dry in run.scaler.requests if not dry and n > 6]


def test_trace_shorter_than_one_loop_is_refused() -> None:
    short = Trace("short", np.array([0.0, 30.0]), np.array([1.0, 1.0]))
    with pytest.raises(ReplayError, match="shorter than one loop"):
        Replay(short, make_settings())


def test_a_recovery_cut_short_by_the_end_of_the_replay_is_incomplete_not_an_unknown_maximum() -> None:
    settings = make_settings()
    run = Replay(step_trace(), settings, hours=1.5)
    run.run(until_s=STEP_AT_S + 2 * 60)  # the scale-out happened just now; its recovery is under way
    assert [r for r in run.scaler.requests if not r[2]], "expected a scale-out right after the step"
    summary = run.result().summary
    assert summary["recoveries"] == 1
    assert summary["recoveries_incomplete"] == 1
    assert summary["slo_misses"] == 0
    # Nothing judged is unbounded, so the longest judged recovery is a number (none finished: 0).
    assert summary["recovery_max_s"] == 0.0


def test_a_round_that_keeps_its_scale_out_says_why_one_worker_fewer_was_refused() -> None:
    """The loop event of a round that keeps the scale-out carries the reason the policy gave the next smaller one
    (``scale_in_refused``); a round that rescales or is held by a guard carries none."""
    from agent.loop import _scale_in_refused
    from planner.types import Decision, ReasonCode

    reasons = ("3: capacity 30,000/s <= average workload 35,000/s", "4: current scale-out qualifies (recovery 40 s)")
    kept = Decision.whole_job(4, 4, reasons, ReasonCode.KEEP, acted=True)
    assert _scale_in_refused(kept, 4) == "capacity 30,000/s <= average workload 35,000/s"
    assert _scale_in_refused(Decision.whole_job(3, 3, reasons[:1], ReasonCode.SCALE_IN, acted=True), 4) is None
    assert _scale_in_refused(Decision.whole_job(4, 4, ("in grace",), ReasonCode.GRACE), 4) is None
    assert _scale_in_refused(kept, None) is None
    settings = load_lab_settings(None, {"telemetry.log_level": "error"})
    run = Replay(Trace("flat", np.array([0.0, 7200.0]), np.array([40_000.0, 40_000.0])), settings, hours=0.5)
    run.run()
    refusals = [
        _scale_in_refused(r.decision, r.analysis.parallelism)
        for r in run.rounds
        if r.decision is not None and r.analysis is not None and r.decision.code is ReasonCode.KEEP
    ]
    assert any(refusals), "a steady job kept at its scale-out says why it keeps it"

"""The StreamBed prior: the agent decides before it has observed a scale-out; observations win."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from agent.analyze import Analyzer
from agent.observation import Observation
from agent.settings import ConfigError
from cli import app
from lab.replay import Replay
from lab.settings import load_lab_settings
from models.streambed.explorer import Surrogate
from models.streambed.model_file import CapacityModelFile, load_capacity_prior, write_capacity_model
from simulator import Trace


def prior_file(path: Path, per_worker: float) -> Path:
    capacities = {n: per_worker * n for n in range(1, 17)}
    model = CapacityModelFile(
        job="test",
        surrogate=Surrogate(family="linear", memory_slope=0.0, slots_slope=per_worker, intercept=0.0),
        memory_mb=2048.0,
        slots_per_scale_out=1,
        capacities=capacities,
        validation={},
    )
    write_capacity_model(path, model)
    return path


def overloaded_from_the_start() -> Trace:
    return Trace("hot", np.array([0.0, 7200.0]), np.array([95_000.0, 95_000.0]))


class NoCpuYet:
    """The first minutes after a deployment: CPU series not scraped yet, so no capacity can be measured."""

    def __init__(self, inner: Any, until: float) -> None:
        self.inner, self.until = inner, until

    def observe(self, *, since: float, now: float) -> Observation:
        observation = self.inner.observe(since=since, now=now)
        if now > self.until:
            return observation
        blank = {w: np.full_like(c, np.nan) for w, c in observation.worker_cpu.items()}
        idle = {w: np.full_like(c, np.nan) for w, c in observation.worker_busy.items()}
        return replace(observation, worker_cpu=blank, worker_busy=idle)


def test_the_first_decision_uses_the_prior_before_anything_is_observed(tmp_path: Path) -> None:
    path = prior_file(tmp_path / "capacity.json", per_worker=11_000)
    settings = load_lab_settings(None, {"capacity_prior_path": str(path), "simulator.initial_parallelism": 4})
    run = Replay(overloaded_from_the_start(), settings, hours=1)
    run.agent.monitor = NoCpuYet(run.monitor, until=60)
    run.run(until_s=60)  # the very first round: nothing about capacity is known but the prior
    first = run.rounds[0]
    assert first.analysis is not None
    assert first.analysis.capacity_sources[10] == "prior"
    # 95k/s needs 9 workers by the prior (99k); the agent rescales at once instead of waiting.
    assert first.decision is not None and first.decision.target_parallelism >= 9
    assert [n for _, n, dry in run.scaler.requests if not dry] == [first.decision.target_parallelism]


def test_a_wrong_prior_is_overridden_once_observations_arrive(tmp_path: Path) -> None:
    # A prior three times too optimistic: 4 workers "carry" 95k/s.
    path = prior_file(tmp_path / "capacity.json", per_worker=40_000)
    settings = load_lab_settings(None, {"capacity_prior_path": str(path), "simulator.initial_parallelism": 4})
    run = Replay(overloaded_from_the_start(), settings, hours=1)
    run.run(until_s=1200)
    analysis = run.rounds[-1].analysis
    assert analysis is not None
    assert analysis.capacity_sources[4] == "observed"
    # Every worker saturated hides the skew from the throughputs (Daedalus' CPU-proportional rule sums
    # the worker capacities: a third too high here); the partition weights, read from the source's
    # offsets, show it, and the capacity is read from them: the truth, not the prior's 160k/s.
    assert analysis.capacities[4] == pytest.approx(run.job.true_capacity(4), rel=0.02)
    assert run.job.target_parallelism >= 9  # observed overload, not the prior, drove the scale-out


def test_a_bad_prior_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "capacity.json"
    bad.write_text("{broken")
    settings = load_lab_settings(None, {"capacity_prior_path": str(bad)})
    with pytest.raises(ConfigError, match="capacity_prior_path"):
        Analyzer(settings)


def test_capacity_plan_command_writes_a_prior_the_agent_can_load(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    result = CliRunner().invoke(app, ["capacity-plan", "--target-rate", "200000", "--max-runs", "6", "--out", str(out)])
    assert result.exit_code == 0, result.output
    prior = load_capacity_prior(out)
    assert sorted(prior) == list(range(1, 17))
    assert prior[16] > prior[4] > 0
    bad = CliRunner().invoke(app, ["capacity-plan", "--target-rate", "-5", "--out", str(out)])
    assert bad.exit_code == 2


def test_a_target_no_slot_count_reaches_is_said_to_be_out_of_reach_with_why(tmp_path: Path) -> None:
    """The plan's row printed ``None`` for a target of 10^12 records/s."""
    out = tmp_path / "model.json"
    result = CliRunner().invoke(app, ["capacity-plan", "--target-rate", "1e12", "--max-runs", "6", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "out of reach (" in text and "needs more than" in text and "│ None" not in result.output
    assert load_capacity_prior(out)  # the capacities of the scale-outs are still written

"""QEScalor per operator (paper 004) on a running job: cost-based parallelism and a resource-profile advice.

Two parts, as in the paper's controller (QECer) and modeller (OPRPMer):

* **Parallelism (QCESA)**: for every vertex, the cheapest number of subtasks per epoch of the workload
  forecast (60-s epochs over the horizon) that covers each epoch, with the price of a subtask-epoch
  and the start-up and shut-down cost of every subtask added or removed (``planner.qescalor.qcesa``).
  The performance of one subtask is DS2's true rate per subtask; the vertex's workload per epoch is
  the forecast times the records it takes in per source record. The first epoch's count is applied:
  unlike DS2 it keeps a subtask that the next epochs will need again when stopping and restarting it
  costs more than running it.
* **Resource profile (OPRPM)**: the performance one subtask of the bottleneck vertex reaches at a
  TaskManager profile (CPU and managed memory per slot) is learned from the profiles the job ran at
  (a running mean per profile kept in the policy state, the samples of the paper's OOPSer) by the
  random-forest regression of ``planner.qescalor.PerformanceModel``. Candidate profiles are the
  memory levels of Justin's ladder at the current CPU per slot; the advice is the profile whose
  QCESA plan for the forecast costs least. With fewer than two profiles sampled there is nothing to
  model: the advice is the next profile to sample (one level up, the DSA's gradient step) and says so.

A profile needs new TaskManagers, so in production it is a recommendation (log, metric, Event),
whatever the target; only the parallelism is applied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.ds2_per_operator import Ds2Plan, apply_manager, ds2_plan, warm_up_hold
from planner.justin import memory_mb
from planner.per_operator import bounds, describe_plan, keep_all, memory_held, operator_code
from planner.qescalor import PerformanceModel, Provision, Sample, qcesa
from planner.types import Decision, PlanInput, PlannerConfig, ProfileRecommendation, ReasonCode

EPOCH_S = 60
"""Length of a QCESA epoch, seconds (the agent's loop)."""
MAX_EPOCHS = 15
"""Epochs of the forecast QCESA plans over (15 minutes at 60 s)."""
MAX_PROFILES = 32
"""Profiles whose samples the state keeps (oldest forgotten first)."""


@dataclass(frozen=True)
class ProfileSample:
    """The running mean performance of one profile: what the job reached with it, and how often it was seen."""

    cpu: float
    memory_mb: float
    performance: float
    count: int

    def update(self, performance: float) -> ProfileSample:
        """Fold one more observation into the mean."""
        count = self.count + 1
        return ProfileSample(
            self.cpu, self.memory_mb, self.performance + (performance - self.performance) / count, count
        )

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"cpu": self.cpu, "memory_mb": self.memory_mb, "performance": self.performance, "count": self.count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileSample:
        """The inverse of :meth:`to_dict`."""
        return cls(float(data["cpu"]), float(data["memory_mb"]), float(data["performance"]), int(data["count"]))


def epoch_peaks(forecast: np.ndarray, *, epoch_s: int = EPOCH_S, max_epochs: int = MAX_EPOCHS) -> list[float]:
    """The forecast's peak in each epoch (QCESA's ``Workload_t``).

    >>> epoch_peaks(np.array([1.0, 3.0, 2.0, 5.0]), epoch_s=2)
    [3.0, 5.0]
    """
    values = np.maximum(np.asarray(forecast, dtype=float), 0.0)
    out = []
    for start in range(0, min(len(values), epoch_s * max_epochs), epoch_s):
        out.append(float(np.max(values[start : start + epoch_s])))
    return out


def price(cpu: float, managed_memory_mb: float, memory_cost_per_gb: float) -> float:
    """Price of one subtask (a slot) for one epoch: its cores plus its memory at the configured rate.

    >>> price(1.0, 1024, 0.125)
    1.125
    """
    return cpu + managed_memory_mb / 1024.0 * memory_cost_per_gb


def _qcesa_plan(
    plan_input: PlanInput,
    config: PlannerConfig,
    dplan: Ds2Plan,
    peaks: list[float],
    running: Provision,
    reasons: list[str],
) -> tuple[dict[str, int], tuple[str, float] | None]:
    """QCESA's subtasks per vertex over the forecast's epoch peaks (DS2's where a vertex has no true rate), and
    the bottleneck: the vertex with the fewest source records/s per subtask, and that rate."""
    ratio = dplan.input_ratio(plan_input.workload_avg or 0.0)
    current = plan_input.current
    wanted: dict[str, int] = {}
    bottleneck: tuple[str, float] | None = None
    for vertex in plan_input.vertices:
        rate = dplan.per_subtask.get(vertex.id)
        lower, upper = bounds(vertex, config)
        if rate is None or rate <= 0:
            wanted[vertex.id] = dplan.parallelism[vertex.id]
            continue
        loads = [max(p * ratio[vertex.id], 0.0) for p in peaks]
        try:
            path = qcesa(
                loads,
                [running],
                {"running": rate},
                {"running": current[vertex.id]},
                startup_cost=config.startup_cost,
                shutdown_cost=config.shutdown_cost,
                max_instances=upper,
            )
            count = path[0]["running"]
        except ValueError:
            count = upper  # even the most subtasks cannot cover an epoch: run all of them
            reasons.append(f"{vertex.name}: the forecast needs more than {upper} subtasks")
        wanted[vertex.id] = min(max(count, lower), upper)
        reasons.append(
            f"{vertex.name}: QCESA {wanted[vertex.id]} subtasks at {rate:,.0f}/s each (epoch peak {loads[0]:,.0f}/s)"
        )
        per_source_record = rate / ratio[vertex.id] if ratio[vertex.id] > 0 else math.inf
        if bottleneck is None or per_source_record < bottleneck[1]:
            bottleneck = (vertex.id, per_source_record)
    return wanted, bottleneck


def _cheapest(
    model: PerformanceModel, levels: list[float], cpu: float, peaks: list[float], config: PlannerConfig
) -> tuple[float, Provision, float] | None:
    """The candidate profile (``cpu`` and each memory level) whose QCESA path over the epoch peaks costs least at
    the performance the model predicts for it: (cost, profile, performance); None when none covers the peaks."""
    candidates = [Provision(f"{mb:.0f}MB", cpu, mb, price(cpu, mb, config.memory_cost_per_gb)) for mb in levels]
    best: tuple[float, Provision, float] | None = None
    for provision in candidates:
        performance = model.predict(provision.cpu, provision.memory_mb)
        if performance <= 0:
            continue
        instances = max(1, math.ceil(max(peaks) / performance))
        try:
            path = qcesa(
                peaks,
                [provision],
                {provision.name: performance},
                {},
                startup_cost=config.startup_cost,
                shutdown_cost=config.shutdown_cost,
                max_instances=max(instances, 1) * 2,
            )
        except ValueError:
            continue
        cost = sum(epoch[provision.name] * provision.price for epoch in path)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, provision, performance)
    return best


class QescalorPerOperator:
    """QEScalor over the job graph: QCESA per vertex, the random-forest profile advice (module docstring)."""

    name = "qescalor"
    uses_forecast = True
    sync_interval_s: float | None = None

    def __init__(self, *, min_scale_down_step: int = 1, seed: int = 0) -> None:
        self.min_scale_down_step = min_scale_down_step
        self.seed = seed

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Warm-up → rates → QCESA per vertex → the profile advice; the state keeps the profile samples."""
        held = warm_up_hold(plan_input, config)
        if held is not None:
            return held
        workload = plan_input.workload_avg
        assert workload is not None
        forecast = plan_input.forecast
        if forecast is None or len(forecast) == 0 or workload <= 0:
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "no workload forecast yet: keeping every vertex")
        dplan = ds2_plan(plan_input.vertices, workload, config)
        if len(dplan.unknown) == len(plan_input.vertices):
            return keep_all(plan_input, ReasonCode.UNKNOWN_DATA, "no vertex has a true rate this interval")
        peaks = epoch_peaks(forecast)
        # QCESA covers each epoch's peak and the workload seen now (the forecast may start below it).
        peaks[0] = max(peaks[0], workload)
        profile = plan_input.memory
        cpu = profile.cpu_per_slot if profile is not None else 1.0
        slot_mb = profile.managed_memory_per_slot_mb if profile is not None else 0.0
        running = Provision("running", cpu, slot_mb, price(cpu, slot_mb, config.memory_cost_per_gb))
        current = plan_input.current
        reasons = [f"qescalor: workload {workload:,.0f}/s, forecast epochs {len(peaks)} of {EPOCH_S} s"]
        wanted, bottleneck = _qcesa_plan(plan_input, config, dplan, peaks, running, reasons)
        target, notes = apply_manager(current, wanted, min_scale_down_step=self.min_scale_down_step)
        reasons += notes
        pressure = memory_held(config, plan_input.memory_pressure)
        if pressure is not None:
            # What the bottleneck reached under GC or a full heap is not the profile's performance.
            reasons.append(f"profile sample not learned this round ({pressure})")
        samples = self._samples(plan_input.policy_state, cpu, slot_mb, None if pressure is not None else bottleneck)
        advice = self._advice(samples, peaks, cpu, slot_mb, config, current_bottleneck=bottleneck)
        reasons.append(f"profile: {advice.reason}")
        reasons.append(f"plan: {describe_plan(target, plan_input.vertices)}")
        state = {"profiles": [s.to_dict() for s in samples[-MAX_PROFILES:]]}
        code = operator_code(current, target, wanted)
        return Decision(target, wanted, tuple(reasons), code, acted=True, policy_state=state, profile=advice)

    # ------------------------------------------------------------------ the OPRPM

    @staticmethod
    def _samples(
        policy_state: Mapping[str, Any] | None, cpu: float, slot_mb: float, bottleneck: tuple[str, float] | None
    ) -> list[ProfileSample]:
        """The profiles sampled so far, with this round's performance of the running one folded in."""
        samples = [ProfileSample.from_dict(d) for d in (policy_state or {}).get("profiles", [])]
        if bottleneck is None or not math.isfinite(bottleneck[1]):
            return samples
        for i, s in enumerate(samples):
            if abs(s.cpu - cpu) < 1e-9 and abs(s.memory_mb - slot_mb) < 0.5:
                samples[i] = s.update(bottleneck[1])
                # The profile seen last goes last, so trimming forgets the oldest.
                samples.append(samples.pop(i))
                return samples
        samples.append(ProfileSample(cpu, slot_mb, bottleneck[1], 1))
        return samples

    def _advice(
        self,
        samples: list[ProfileSample],
        peaks: list[float],
        cpu: float,
        slot_mb: float,
        config: PlannerConfig,
        *,
        current_bottleneck: tuple[str, float] | None,
    ) -> ProfileRecommendation:
        """The cheapest candidate profile for the forecast by the fitted model, or the next one to sample."""
        levels = [memory_mb(level, min_memory_mb=config.memory_min_mb) for level in range(config.memory_max_level)]
        distinct = {(s.cpu, round(s.memory_mb)) for s in samples}
        if len(distinct) < 2:
            higher = [mb for mb in levels if mb > slot_mb + 0.5]
            next_mb = higher[0] if higher else slot_mb
            performance = current_bottleneck[1] if current_bottleneck is not None else None
            return ProfileRecommendation(
                cpu,
                next_mb,
                performance,
                None,
                exploring=True,
                reason=f"{len(distinct)} profile(s) sampled, too few to model: sample {next_mb:.0f} MB per slot next",
            )
        model = PerformanceModel(n_estimators=100, seed=self.seed).fit(
            [Sample(s.cpu, s.memory_mb, s.performance) for s in samples]
        )
        best = _cheapest(model, levels, cpu, peaks, config)
        if best is None:
            return ProfileRecommendation(
                cpu, slot_mb, None, None, exploring=False, reason="no profile covers the forecast"
            )
        cost, provision, performance = best
        return ProfileRecommendation(
            provision.cpu,
            provision.memory_mb,
            performance,
            cost,
            exploring=False,
            reason=f"{provision.memory_mb:.0f} MB per slot: {performance:,.0f}/s per bottleneck subtask, "
            f"cost {cost:.1f} over the horizon (model of {len(samples)} profiles)",
        )

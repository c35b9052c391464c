"""StreamBed runner: drives the Resource Explorer, Configuration Optimizer and Capacity Estimator
against a testbed (the simulator's operator-DAG mode by default) and writes the capacity model file
that the agent reads as its prior for unobserved scale-outs (``capacity_prior_path``).

One call, ``plan_capacity``, with no settings object, so ``perdix capacity-plan`` and the benchmarks
use it the same way. Each testbed run (one capacity estimation) is reported to a progress callback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from models.streambed import (
    CapacityEstimate,
    CapacityModelFile,
    EstimatorSettings,
    ExplorerSettings,
    InfeasibleBudget,
    OperatorRate,
    ResourceExplorer,
    UnreachableRate,
    estimate_capacity,
    optimize_configuration,
    rates_from_measurement,
    write_capacity_model,
)
from models.streambed.testbed import Testbed
from simulator.dag import DagTestbed, DagTestbedSettings

Purpose = Literal["single-task", "budget"]


class CapacityPlanError(ValueError):
    """The plan cannot be made with the given arguments (one line, for the CLI's exit 2)."""


@dataclass(frozen=True)
class RunReport:
    """One finished testbed run (a capacity estimation), for progress display."""

    index: int
    """1-based number of this run."""
    max_runs: int
    purpose: Purpose
    """``single-task``: parallelism 1 everywhere, to measure operator rates; ``budget``: a CO config."""
    task_slots: int
    memory_mb: float
    parallelism: tuple[int, ...]
    mst: float
    """Maximum sustainable throughput measured, records/s."""
    simulated_s: int
    """Testbed seconds the estimation took."""


ProgressCallback = Callable[[RunReport], None]


@dataclass
class _Measured:
    """A run kept for choosing operator rates later."""

    task_slots: int
    memory_mb: float
    parallelism: tuple[int, ...]
    estimate: CapacityEstimate
    purpose: Purpose
    explored: bool = False
    """Whether the Resource Explorer fits its surrogate on this run (single-task runs below the
    explored budgets only give operator rates)."""


def plan_capacity(
    *,
    target_rate: float,
    max_runs: int,
    out_path: str | Path,
    progress: ProgressCallback | None = None,
    seed: int = 0,
    testbed: Testbed | None = None,
    max_testbed_slots: int = 16,
    min_testbed_slots: int | None = None,
    memory_profiles_mb: Sequence[float] = (1024.0, 2048.0, 4096.0),
    production_memory_mb: float | None = None,
    max_scale_out: int = 16,
    slots_per_scale_out: int = 1,
    estimator: EstimatorSettings | None = None,
    explorer: ExplorerSettings | None = None,
    job_name: str | None = None,
    testbed_info: Mapping[str, Any] | None = None,
) -> CapacityModelFile:
    """Build a capacity model with at most ``max_runs`` testbed runs and write it to ``out_path``.

    The explored budgets run from ``min_testbed_slots`` (default: two per operator) to
    ``max_testbed_slots`` task slots over the given memory profiles. Below about two tasks per
    operator the integer split of a few slots dominates the capacity (a light operator wastes a
    whole slot), which tells nothing about how the job scales and bends the surrogate; the paper
    likewise starts its larger queries above one slot per operator. The single-task configuration
    is still measured once, for the Configuration Optimizer's operator rates. Capacities are written
    for scale-outs ``1..max_scale_out`` of ``slots_per_scale_out`` task slots each at
    ``production_memory_mb`` (default: the largest profile), with the task slots for ``target_rate``
    at 110 % (the inverse query). ``job_name`` (default: the testbed's job's) names the job in the
    file, and ``testbed_info`` describes the testbed there (``extra.testbed``).

    Steps: check the arguments, explore the budgets on the testbed, fit and query the surrogate,
    write the file.
    """
    memory_profiles, production_memory = _checked_memory(
        target_rate, max_runs, max_scale_out, slots_per_scale_out, memory_profiles_mb, production_memory_mb
    )
    bed: Testbed = testbed or DagTestbed(settings=DagTestbedSettings(seed=seed))
    operators = len(bed.operator_names)
    lowest = _lowest_budget(operators, min_testbed_slots, max_testbed_slots)
    explore = ResourceExplorer(
        task_slots=range(lowest, max_testbed_slots + 1),
        memory_mb=memory_profiles,
        settings=explorer or ExplorerSettings(),
        seed=seed,
    )
    runs = _TestbedRuns(bed, estimator or EstimatorSettings(), seed=seed, max_runs=max_runs, progress=progress)
    _explore(explore, runs, operators=operators, lowest=lowest)
    if len(explore.observations) < 3:
        raise CapacityPlanError(
            f"only {len(explore.observations)} measurements within {max_runs} runs: a surrogate needs 3"
        )
    model = _model_file(
        bed,
        explore,
        runs.measured,
        target_rate=target_rate,
        production_memory=production_memory,
        max_scale_out=max_scale_out,
        slots_per_scale_out=slots_per_scale_out,
        job_name=job_name or str(getattr(getattr(bed, "job", None), "name", "job")),
        extra={
            "stop_reason": explore.stop_reason or f"used all {max_runs} runs",
            # Capacities outside this range of task slots are extrapolated (below it, the fitted
            # intercept can understate a small scale-out; observed capacities replace them).
            "explored_task_slots": [lowest, max_testbed_slots],
            "memory_profiles_mb": memory_profiles,
            **({"testbed": dict(testbed_info)} if testbed_info is not None else {}),
        },
    )
    write_capacity_model(out_path, model)
    return model


def _checked_memory(
    target_rate: float,
    max_runs: int,
    max_scale_out: int,
    slots_per_scale_out: int,
    memory_profiles_mb: Sequence[float],
    production_memory_mb: float | None,
) -> tuple[list[float], float]:
    """The sorted memory profiles and the production memory, after checking every argument."""
    if not math.isfinite(target_rate) or target_rate <= 0:
        raise CapacityPlanError(f"target rate must be a positive number of records/s, got {target_rate}")
    if max_runs < 3:
        raise CapacityPlanError(f"max runs must be at least 3 (a surrogate needs 3 measurements), got {max_runs}")
    if max_scale_out < 1 or slots_per_scale_out < 1:
        raise CapacityPlanError("max scale-out and slots per scale-out must be at least 1")
    memory_profiles = sorted({float(m) for m in memory_profiles_mb})
    if not memory_profiles or memory_profiles[0] <= 0:
        raise CapacityPlanError(f"memory profiles must be positive MB values, got {list(memory_profiles_mb)}")
    production_memory = float(production_memory_mb) if production_memory_mb is not None else memory_profiles[-1]
    if production_memory <= 0:
        raise CapacityPlanError(f"production memory must be positive, got {production_memory} MB")
    return memory_profiles, production_memory


def _lowest_budget(operators: int, min_testbed_slots: int | None, max_testbed_slots: int) -> int:
    """The smallest explored budget: two tasks per operator unless set (checked against the testbed)."""
    if max_testbed_slots < operators:
        raise CapacityPlanError(
            f"the testbed needs at least {operators} task slots (one per operator), got {max_testbed_slots}"
        )
    lowest = min(max_testbed_slots, 2 * operators) if min_testbed_slots is None else min_testbed_slots
    if not operators <= lowest <= max_testbed_slots:
        raise CapacityPlanError(
            f"min testbed slots must be between {operators} (one per operator) and max testbed slots "
            f"{max_testbed_slots}, got {lowest}"
        )
    return lowest


class _TestbedRuns:
    """The testbed runs made so far: each one a Capacity Estimator binary search, reported to ``progress``."""

    def __init__(
        self, bed: Testbed, settings: EstimatorSettings, *, seed: int, max_runs: int, progress: ProgressCallback | None
    ) -> None:
        self.bed = bed
        self.settings = settings
        self.seed = seed
        self.max_runs = max_runs
        self.progress = progress
        self.measured: list[_Measured] = []

    @property
    def exhausted(self) -> bool:
        """True once ``max_runs`` runs were made."""
        return len(self.measured) >= self.max_runs

    def run(self, parallelism: tuple[int, ...], memory_mb: float, purpose: Purpose) -> CapacityEstimate:
        """Deploy one configuration and measure its maximum sustainable throughput."""
        deployment = self.bed.deploy(parallelism, memory_mb, seed=self.seed * 10_007 + len(self.measured))
        estimate = estimate_capacity(deployment, self.settings)
        self.measured.append(_Measured(sum(parallelism), memory_mb, parallelism, estimate, purpose))
        if self.progress is not None:
            self.progress(
                RunReport(
                    index=len(self.measured),
                    max_runs=self.max_runs,
                    purpose=purpose,
                    task_slots=sum(parallelism),
                    memory_mb=memory_mb,
                    parallelism=parallelism,
                    mst=estimate.mst,
                    simulated_s=estimate.simulated_s,
                )
            )
        return estimate


def _explore(explore: ResourceExplorer, runs: _TestbedRuns, *, operators: int, lowest: int) -> None:
    """The Resource Explorer's loop: ask a budget, configure it with the CO, measure it with the CE, tell."""
    single = tuple([1] * operators)
    while not explore.finished and not runs.exhausted:
        task_slots, memory_mb = explore.ask()
        if task_slots == operators:
            explore.tell(task_slots, memory_mb, runs.run(single, memory_mb, "single-task").mst)
            runs.measured[-1].explored = True
            continue
        rates = _rates_for(runs.measured, task_slots, memory_mb) or _rates_for(runs.measured, task_slots, None)
        if rates is None:
            # The CO needs operator rates: measure the single-task configuration once.
            estimate = runs.run(single, memory_mb, "single-task")
            if lowest == operators:
                explore.tell(operators, memory_mb, estimate.mst)
                runs.measured[-1].explored = True
            if explore.finished or runs.exhausted:
                continue
            rates = _rates_for(runs.measured, task_slots, memory_mb)
            assert rates is not None
        configuration = optimize_configuration(rates, task_slots)
        estimate = runs.run(configuration.parallelism, memory_mb, "budget")
        explore.tell(task_slots, memory_mb, estimate.mst)
        runs.measured[-1].explored = True


def _model_file(
    bed: Testbed,
    explore: ResourceExplorer,
    measured: Sequence[_Measured],
    *,
    target_rate: float,
    production_memory: float,
    max_scale_out: int,
    slots_per_scale_out: int,
    job_name: str,
    extra: dict[str, Any],
) -> CapacityModelFile:
    """The chosen surrogate's capacities per scale-out, the inverse query for the target, and the evidence."""
    choice = explore.choice()
    surrogate = choice.surrogate
    capacities = {
        n: max(0.0, surrogate.capacity_at(n * slots_per_scale_out, production_memory))
        for n in range(1, max_scale_out + 1)
    }
    slots_for_target: int | None = None
    try:
        slots_for_target = surrogate.task_slots_for(target_rate, production_memory, min_slots=len(bed.operator_names))
    except UnreachableRate as unreachable:
        extra["inverse_error"] = str(unreachable)
    if slots_for_target is not None:
        rates = _rates_for(measured, slots_for_target, production_memory) or _rates_for(
            measured, slots_for_target, None
        )
        if rates is not None:
            try:
                configuration = optimize_configuration(rates, slots_for_target)
                extra["configuration"] = dict(zip(bed.operator_names, configuration.parallelism))
            except InfeasibleBudget as infeasible:
                extra["configuration_error"] = str(infeasible)
        extra["scale_out_for_target"] = math.ceil(slots_for_target / slots_per_scale_out)

    mean_capacity = sum(o.capacity for o in explore.observations) / len(explore.observations)
    score = choice.score
    return CapacityModelFile(
        job=job_name,
        surrogate=surrogate,
        memory_mb=production_memory,
        slots_per_scale_out=slots_per_scale_out,
        capacities=capacities,
        validation={
            "selection": choice.selection,
            "families_identifiable": choice.identifiable,
            "loocv_rmse": _json_number(score.loocv_rmse),
            "extrapolation_rmse": _json_number(score.extrapolation_rmse),
            "relative_loocv_error": _json_number(score.loocv_rmse / mean_capacity) if mean_capacity > 0 else None,
            "families": {
                s.family: {
                    "loocv_rmse": _json_number(s.loocv_rmse),
                    "extrapolation_rmse": _json_number(s.extrapolation_rmse),
                }
                for s in choice.scores
            },
        },
        target_rate=float(target_rate),
        task_slots_for_target=slots_for_target,
        observations=tuple(
            {
                "task_slots": m.task_slots,
                "memory_mb": m.memory_mb,
                "capacity": m.estimate.mst,
                "parallelism": list(m.parallelism),
                "purpose": m.purpose,
                "explored": m.explored,
                "simulated_s": m.estimate.simulated_s,
            }
            for m in measured
        ),
        testbed_runs=len(measured),
        extra=extra,
    )


def _rates_for(
    measured: Sequence[_Measured], task_slots: int, memory_mb: float | None
) -> tuple[OperatorRate, ...] | None:
    """Operator rates from the run closest in task slots at this memory profile (any profile if None).

    The paper's CO uses a single-task run per memory profile; rates measured nearer the requested
    budget already include its network and skew effects, so the closest run (ties: the larger one)
    is used, and a profile without runs borrows another's (the CE then measures the real MST at
    the requested profile, so only the split of the slots depends on it).
    """
    candidates = [m for m in measured if memory_mb is None or m.memory_mb == memory_mb]
    if not candidates:
        return None
    nearest = min(candidates, key=lambda m: (abs(m.task_slots - task_slots), -m.task_slots))
    return rates_from_measurement(nearest.estimate.measurement)


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None

"""Configuration Optimizer (StreamBed §V, BIDS2): operator parallelisms for a task-slot budget.

From the metrics of a measured configuration, each operator ``i`` has a true processing rate per task
``r_i`` (records per second of busy time, DS2) and a ratio ``a_i`` of its input rate to the source
rate. Bounded-Inverse DS2 maximises the source rate ``L`` such that no operator bottlenecks:

    maximise  L
    subject to  a_i * L <= r_i * p_i     for every operator i      (Eq. 2-3)
                sum_i p_i = T                                       (Eq. 4)
                p_i integer, 1 <= p_i <= max_parallelism_i

solved as a MILP with PuLP's bundled CBC. Several configurations often reach the same ``L``; a second
solve keeps ``L`` at its optimum and gives the leftover slots to the operators with the highest load
per slot (``a_i / r_i``), which are the ones that suffer first from skew and state at scale.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pulp

from models.streambed.testbed import Measurement


class InfeasibleBudget(ValueError):
    """No configuration fits the task-slot budget."""


@dataclass(frozen=True)
class OperatorRate:
    """What BIDS2 needs to know about one operator."""

    name: str
    true_rate: float
    """Records one task processes per second of busy time."""
    input_ratio: float
    """The operator's input rate divided by the source rate."""
    max_parallelism: int | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.true_rate) or self.true_rate <= 0:
            raise ValueError(f"operator {self.name}: true_rate must be positive, got {self.true_rate}")
        if not math.isfinite(self.input_ratio) or self.input_ratio < 0:
            raise ValueError(f"operator {self.name}: input_ratio must be >= 0, got {self.input_ratio}")
        if self.max_parallelism is not None and self.max_parallelism < 1:
            raise ValueError(f"operator {self.name}: max_parallelism must be >= 1")


@dataclass(frozen=True)
class Configuration:
    """Parallelism per operator and the source rate BIDS2 predicts for it."""

    parallelism: tuple[int, ...]
    predicted_rate: float

    @property
    def task_slots(self) -> int:
        """Slots the configuration uses (one per task)."""
        return sum(self.parallelism)


def rates_from_measurement(
    measurement: Measurement, *, max_parallelism: Sequence[int | None] | None = None
) -> tuple[OperatorRate, ...]:
    """DS2 rates of each operator from a capacity estimate's measurement at the MST."""
    source = measurement.achieved_rate
    if source <= 0:
        raise ValueError("the measurement has no source throughput: cannot derive operator ratios")
    rates = []
    for i, op in enumerate(measurement.operators):
        if op.true_rate_per_task <= 0:
            raise ValueError(f"operator {op.name} processed nothing in the measurement: no true rate")
        bound = max_parallelism[i] if max_parallelism is not None else None
        rates.append(OperatorRate(op.name, op.true_rate_per_task, op.input_rate / source, bound))
    return tuple(rates)


def bound_rate(rates: Sequence[OperatorRate], parallelism: Sequence[int]) -> float:
    """Source rate at which the first operator saturates: ``min_i r_i p_i / a_i``."""
    return min(
        (rate.true_rate * p / rate.input_ratio for rate, p in zip(rates, parallelism) if rate.input_ratio > 0),
        default=math.inf,
    )


def optimize_configuration(rates: Sequence[OperatorRate], task_slots: int) -> Configuration:
    """The configuration of ``task_slots`` tasks with the highest source rate (BIDS2 MILP)."""
    n = len(rates)
    if n == 0:
        raise ValueError("no operators to configure")
    upper = [min(task_slots, r.max_parallelism or task_slots) for r in rates]
    if task_slots < n:
        raise InfeasibleBudget(
            f"task-slot budget {task_slots} is below the {n} operators of the query (each needs >= 1 slot)"
        )
    if sum(upper) < task_slots:
        raise InfeasibleBudget(
            f"task-slot budget {task_slots} exceeds what the operators can use ({sum(upper)}, "
            "limited by their max parallelism)"
        )
    if all(r.input_ratio == 0 for r in rates):
        raise ValueError("every operator has input ratio 0: the source rate is unbounded")

    def build(name: str) -> tuple[pulp.LpProblem, list[pulp.LpVariable], pulp.LpVariable]:
        problem = pulp.LpProblem(name, pulp.LpMaximize)
        slots = [_variable(problem, f"p{i}", lowBound=1, upBound=upper[i], cat="Integer") for i in range(n)]
        source = _variable(problem, "source_rate", lowBound=0)
        for i, rate in enumerate(rates):
            if rate.input_ratio > 0:
                # Scaled by 1/r_i so coefficients stay near 1 whatever the rate magnitudes.
                problem += (rate.input_ratio / rate.true_rate) * source <= slots[i], f"no_bottleneck_{i}"
        problem += pulp.lpSum(slots) == task_slots, "budget"
        return problem, slots, source

    problem, slots, source = build("bids2")
    problem += source
    _solve(problem, task_slots)
    first = tuple(int(round(float(pulp.value(v)))) for v in slots)
    # The exact rate of the integer solution, not the solver's float (integrality tolerances).
    best = bound_rate(rates, first)

    # Second pass: same rate, leftover slots to the heaviest operators.
    tie, tie_slots, tie_source = build("bids2_tiebreak")
    tie += tie_source >= best * (1 - 1e-6)
    load = [r.input_ratio / r.true_rate for r in rates]
    scale = max(load) or 1.0
    tie += pulp.lpSum((load[i] / scale) * tie_slots[i] for i in range(n))
    parallelism = first
    if pulp.LpStatus[_run_cbc(tie)] == "Optimal":
        candidate = tuple(int(round(float(pulp.value(v)))) for v in tie_slots)
        if sum(candidate) == task_slots and bound_rate(rates, candidate) >= best * (1 - 1e-6):
            parallelism = candidate
    return Configuration(parallelism=parallelism, predicted_rate=bound_rate(rates, parallelism))


def _variable(problem: pulp.LpProblem, name: str, **bounds: float | str) -> pulp.LpVariable:
    """A variable of ``problem``: ``add_variable`` on PuLP >= 3.3, the constructor before."""
    if hasattr(problem, "add_variable"):
        return problem.add_variable(name, **bounds)
    return pulp.LpVariable(name, **bounds)


def _run_cbc(problem: pulp.LpProblem) -> int:
    """Solve with the CBC binary bundled in PuLP; returns the PuLP status code."""
    with warnings.catch_warnings():
        # PuLP 3.x marks its bundled CBC as deprecated for 4.0 (which moves it to the pulp[cbc]
        # extra); it is the solver installed with PuLP here, so the notice is not actionable.
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False)
    return int(problem.solve(solver))


def _solve(problem: pulp.LpProblem, task_slots: int) -> None:
    status = _run_cbc(problem)
    if pulp.LpStatus[status] != "Optimal":
        raise InfeasibleBudget(f"no configuration for a budget of {task_slots} task slots ({pulp.LpStatus[status]})")

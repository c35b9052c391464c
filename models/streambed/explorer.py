"""Resource Explorer (StreamBed §VI): a surrogate of capacity over task slots and memory per slot.

Three candidate surrogates, each a linear regression on transformed resources (Eq. 6-8)::

    linear:       C(T, M) = a * M       + b * T       + c
    logarithmic:  C(T, M) = a * ln M    + b * ln T    + c
    sqrt:         C(T, M) = a * sqrt(M) + b * sqrt(T) + c

with ``T`` the task slots (one task each) and ``M`` the memory per slot in MB. Every candidate is
scored by leave-one-out cross-validation (LOOCV RMSE) and by how well it extrapolates: fitted on the
half of the observations with the fewest task slots, its RMSE on the other half (the paper's model
selection rule). The model is picked by LOOCV by default, as the issue asks; ``selection=
"extrapolation"`` uses the paper's half split instead.

Measurements are chosen by Bayesian optimisation: a Gaussian process over the (T, M) grid models
the cost of Eq. 9 (the lowest LOOCV RMSE among the candidates after a measurement) and expected
improvement picks the next budget among those not measured yet, after a bootstrap on the four
corners of the grid; once every budget is measured, the least measured one is repeated (ties: the
most task slots), to average out measurement noise. The search stops after at least three
measurements beyond the corners once the cost rises by more than 10 % between two measurements,
or at a maximum count (20 by default). The inverse query returns the smallest number of task slots
whose predicted capacity reaches 110 % of a requested rate.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

Family = Literal["linear", "logarithmic", "sqrt"]
FAMILIES: tuple[Family, ...] = ("linear", "logarithmic", "sqrt")
Selection = Literal["extrapolation", "loocv"]

_TRANSFORMS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": lambda x: x,
    "logarithmic": np.log,
    "sqrt": np.sqrt,
}
_INVERSES: dict[str, Callable[[float], float]] = {
    "linear": lambda y: y,
    "logarithmic": lambda y: math.exp(min(y, 700.0)),
    "sqrt": lambda y: y * y if y > 0 else 0.0,
}


class UnreachableRate(ValueError):
    """The surrogate never predicts the requested rate within the allowed task slots."""


@dataclass(frozen=True)
class BudgetMeasurement:
    """One measured budget: task slots, memory per slot and the MST of its best configuration."""

    task_slots: int
    memory_mb: float
    capacity: float

    def __post_init__(self) -> None:
        if self.task_slots < 1 or self.memory_mb <= 0:
            raise ValueError(f"task_slots must be >= 1 and memory_mb > 0, got {self.task_slots}, {self.memory_mb}")
        if not math.isfinite(self.capacity) or self.capacity < 0:
            raise ValueError(f"capacity must be a finite non-negative rate, got {self.capacity}")


def _design(family: str, task_slots: np.ndarray, memory_mb: np.ndarray) -> np.ndarray:
    transform = _TRANSFORMS[family]
    return np.column_stack([transform(memory_mb), transform(task_slots), np.ones_like(task_slots)])


@dataclass(frozen=True)
class Surrogate:
    """A fitted surrogate ``C = a * f(M) + b * f(T) + c`` of one family."""

    family: Family
    memory_slope: float
    slots_slope: float
    intercept: float

    def predict(self, task_slots: float | np.ndarray, memory_mb: float | np.ndarray) -> np.ndarray:
        """Predicted capacity (records/s) at ``task_slots`` and ``memory_mb`` per slot."""
        slots = np.asarray(task_slots, dtype=float)
        memory = np.broadcast_to(np.asarray(memory_mb, dtype=float), slots.shape)
        transform = _TRANSFORMS[self.family]
        return self.memory_slope * transform(memory) + self.slots_slope * transform(slots) + self.intercept

    def capacity_at(self, task_slots: float, memory_mb: float) -> float:
        """Predicted capacity at one budget, as a float."""
        return float(self.predict(task_slots, memory_mb))

    def task_slots_for(
        self, rate: float, memory_mb: float, *, headroom: float = 1.1, min_slots: int = 1, max_slots: int = 1_000_000
    ) -> int:
        """Fewest task slots whose predicted capacity reaches ``headroom * rate`` (§VI, model usage)."""
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"requested rate must be positive, got {rate}")
        goal = headroom * rate
        if self.capacity_at(min_slots, memory_mb) >= goal:
            return min_slots
        if self.slots_slope <= 0:
            raise UnreachableRate(
                f"the {self.family} surrogate does not grow with task slots: {rate:.0f} records/s is out of reach"
            )
        transform_m = _TRANSFORMS[self.family](np.asarray(float(memory_mb)))
        needed = (goal - self.memory_slope * float(transform_m) - self.intercept) / self.slots_slope
        # Closed-form inverse, then step to the first integer that really reaches the goal.
        slots = max(min_slots, int(math.floor(_INVERSES[self.family](needed))) - 1)
        while slots <= max_slots and self.capacity_at(slots, memory_mb) < goal:
            slots += 1
        if slots > max_slots:
            raise UnreachableRate(
                f"{rate:.0f} records/s (x{headroom:g}) needs more than {max_slots} task slots "
                f"under the {self.family} surrogate"
            )
        return slots

    def to_dict(self) -> dict[str, object]:
        """JSON-ready parameters."""
        return {
            "family": self.family,
            "memory_slope": self.memory_slope,
            "slots_slope": self.slots_slope,
            "intercept": self.intercept,
        }


def _arrays(observations: Sequence[BudgetMeasurement]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    slots = np.array([o.task_slots for o in observations], dtype=float)
    memory = np.array([o.memory_mb for o in observations], dtype=float)
    capacity = np.array([o.capacity for o in observations], dtype=float)
    return slots, memory, capacity


def _fit(family: Family, slots: np.ndarray, memory: np.ndarray, capacity: np.ndarray) -> Surrogate:
    design = _design(family, slots, memory)
    # Least squares; with a single memory profile the memory column is collinear with the intercept
    # and lstsq returns the minimum-norm split, which predicts the same at that profile.
    coef, *_ = np.linalg.lstsq(design, capacity, rcond=None)
    return Surrogate(family, float(coef[0]), float(coef[1]), float(coef[2]))


def fit_surrogate(family: Family, observations: Sequence[BudgetMeasurement]) -> Surrogate:
    """Least-squares fit of one surrogate family."""
    if family not in _TRANSFORMS:
        raise ValueError(f"unknown surrogate family {family!r}; expected one of {FAMILIES}")
    if not observations:
        raise ValueError("cannot fit a surrogate on no observations")
    return _fit(family, *_arrays(observations))


def loocv_rmse(family: Family, observations: Sequence[BudgetMeasurement]) -> float:
    """Leave-one-out cross-validation RMSE of a family (inf with fewer than 3 observations)."""
    if len(observations) < 3:
        return math.inf
    slots, memory, capacity = _arrays(observations)
    errors = np.empty(len(observations))
    everything = np.arange(len(observations))
    for i in everything:
        keep = everything != i
        model = _fit(family, slots[keep], memory[keep], capacity[keep])
        errors[i] = model.capacity_at(slots[i], memory[i]) - capacity[i]
    return float(np.sqrt(np.mean(errors**2)))


def extrapolation_rmse(family: Family, observations: Sequence[BudgetMeasurement]) -> float:
    """RMSE on the half with the most task slots of a fit on the other half (inf if too few points)."""
    ordered = sorted(observations, key=lambda o: (o.task_slots, o.memory_mb))
    half = len(ordered) // 2
    train, test = ordered[:half], ordered[half:]
    if len(train) < 2 or len({o.task_slots for o in train}) < 2:
        return math.inf
    model = fit_surrogate(family, train)
    slots, memory, capacity = _arrays(test)
    return float(np.sqrt(np.mean((model.predict(slots, memory) - capacity) ** 2)))


@dataclass(frozen=True)
class FamilyScore:
    """Validation errors of one family on the observations."""

    family: Family
    loocv_rmse: float
    extrapolation_rmse: float


@dataclass(frozen=True)
class SurrogateChoice:
    """The selected surrogate (fitted on all observations) and the scores of every family."""

    surrogate: Surrogate
    selection: Selection
    scores: tuple[FamilyScore, ...]
    identifiable: bool = True
    """False when no dimension has three distinct values: every family then draws the same line
    through the measured budgets, the scores differ by noise only, and the linear one is kept."""

    @property
    def score(self) -> FamilyScore:
        """Scores of the selected family."""
        return next(s for s in self.scores if s.family == self.surrogate.family)


def select_surrogate(observations: Sequence[BudgetMeasurement], selection: Selection = "loocv") -> SurrogateChoice:
    """Fit every family and keep the one with the lowest error under ``selection``.

    ``loocv`` ranks by leave-one-out RMSE; ``extrapolation`` by the paper's split (fit on the
    smaller half of the budgets, test on the larger), falling back to LOOCV while that split is
    undefined. Ties keep the simpler family in the order linear, logarithmic, sqrt. A family bends
    its dimension only where that dimension has at least three distinct values: with two task-slot
    counts and two memory profiles or fewer, the data cannot tell the families apart, so the linear
    one is kept (``identifiable`` False) rather than the one the noise favours.
    """
    if len(observations) < 3:
        raise ValueError(f"need at least 3 observations to select a surrogate, got {len(observations)}")
    identifiable = len({o.task_slots for o in observations}) >= 3 or len({o.memory_mb for o in observations}) >= 3
    scores = tuple(
        FamilyScore(family, loocv_rmse(family, observations), extrapolation_rmse(family, observations))
        for family in FAMILIES
    )
    use_split = selection == "extrapolation" and all(math.isfinite(s.extrapolation_rmse) for s in scores)

    def key(score: FamilyScore) -> float:
        return score.extrapolation_rmse if use_split else score.loocv_rmse

    best = min(scores, key=key) if identifiable else scores[0]
    return SurrogateChoice(fit_surrogate(best.family, observations), selection, scores, identifiable)


def surrogate_cost(observations: Sequence[BudgetMeasurement]) -> float:
    """Eq. 9: the lowest LOOCV RMSE among the candidate families."""
    return min(loocv_rmse(family, observations) for family in FAMILIES)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    """Expected improvement below ``best`` of a Gaussian prediction (minimisation)."""
    std = np.maximum(std, 1e-12)
    improvement = best - mean - xi
    z = improvement / std
    return improvement * norm.cdf(z) + std * norm.pdf(z)


@dataclass(frozen=True)
class ExplorerSettings:
    """Stop criterion and acquisition of the Resource Explorer."""

    min_after_bootstrap: int = 3
    max_measurements: int = 20
    stop_increase: float = 0.10
    """Stop when the cost rises by more than this fraction between two measurements."""
    xi: float = 0.3
    """Exploration margin of expected improvement, relative to the mean cost.

    Eq. 9 changes little from one budget to the next once the corners are in, so with a small
    margin expected improvement clings to the budgets next to the measured ones; a wide margin
    spreads the measurements over the task-slot range, which is what extrapolation needs.
    """
    selection: Selection = "loocv"

    def __post_init__(self) -> None:
        if self.min_after_bootstrap < 0 or self.max_measurements < 4:
            raise ValueError("min_after_bootstrap must be >= 0 and max_measurements >= 4 (the corners)")
        if self.stop_increase < 0 or self.xi < 0:
            raise ValueError("stop_increase and xi must be >= 0")


@dataclass
class ResourceExplorer:
    """Ask/tell driver of the measurements: corners first, then Bayesian optimisation of Eq. 9."""

    task_slots: Sequence[int]
    memory_mb: Sequence[float]
    settings: ExplorerSettings = field(default_factory=ExplorerSettings)
    seed: int = 0
    observations: list[BudgetMeasurement] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    """Eq. 9 after each measurement from the fourth on (the bootstrap's cost is the first)."""
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        slots = sorted({int(t) for t in self.task_slots})
        memory = sorted({float(m) for m in self.memory_mb})
        if not slots or slots[0] < 1 or not memory or memory[0] <= 0:
            raise ValueError("the search space needs task slots >= 1 and memory per slot > 0")
        self.task_slots = slots
        self.memory_mb = memory
        self._grid = np.array([(t, m) for t in slots for m in memory], dtype=float)
        corners = [(slots[0], memory[0]), (slots[0], memory[-1]), (slots[-1], memory[0]), (slots[-1], memory[-1])]
        self._corners = list(dict.fromkeys(corners))
        self._points: list[tuple[int, float]] = []

    @property
    def finished(self) -> bool:
        """Whether the stop criterion has been met."""
        return self.stop_reason is not None

    def ask(self) -> tuple[int, float]:
        """The next budget to measure: a missing corner, else the grid point of highest EI."""
        if self.finished:
            raise RuntimeError(f"the exploration has stopped: {self.stop_reason}")
        done = set(self._points)
        for corner in self._corners:
            if corner not in done:
                return corner
        if all((int(t), float(m)) in done for t, m in self._grid):
            return self._repeat()
        x = self._normalise(np.array(self._points, dtype=float))
        y = np.array(self._point_costs())
        scale = float(np.mean(np.abs(y))) or 1.0
        kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=0.5, length_scale_bounds=(0.05, 10.0), nu=2.5)
        kernel += WhiteKernel(1e-2, (1e-6, 1.0))
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=self.seed, n_restarts_optimizer=0)
        with warnings.catch_warnings():
            # Few, noisy points: the optimiser often hits a bound, which is expected and harmless here.
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x, y / scale)
        # Only budgets not measured yet: with Eq. 9 attached to points, repeating a measured budget
        # always looks cheap (it agrees with itself) and the search would stall on a corner.
        measured = {(float(t), float(m)) for t, m in self._points}
        candidates = self._grid[np.array([(t, m) not in measured for t, m in self._grid])]
        mean, std = gp.predict(self._normalise(candidates), return_std=True)
        gain = expected_improvement(mean, std, float(np.min(y / scale)), self.settings.xi)
        t, m = candidates[int(np.argmax(gain))]
        return int(t), float(m)

    def _repeat(self) -> tuple[int, float]:
        """Once every budget is measured: the least measured one again, ties to the most task slots.

        Repeats average out measurement noise (the paper re-evaluates budgets for that); spreading
        them evenly keeps every budget's mean equally sure, and the budget with the most task slots
        comes first because an extrapolation to larger budgets leans on it most.
        """
        counts = {(int(t), float(m)): 0 for t, m in self._grid}
        for point in self._points:
            counts[point] += 1
        return min(counts, key=lambda point: (counts[point], -point[0], -point[1]))

    def tell(self, task_slots: int, memory_mb: float, capacity: float) -> None:
        """Record a measurement, update the cost of Eq. 9 and check the stop criterion."""
        self.observations.append(BudgetMeasurement(int(task_slots), float(memory_mb), float(capacity)))
        self._points.append((int(task_slots), float(memory_mb)))
        bootstrap = len(self._corners)
        if len(self.observations) >= bootstrap:
            self.costs.append(surrogate_cost(self.observations))
        count = len(self.observations)
        if count >= self.settings.max_measurements:
            self.stop_reason = f"reached {self.settings.max_measurements} measurements"
        elif count >= bootstrap + self.settings.min_after_bootstrap and len(self.costs) >= 2:
            previous, current = self.costs[-2], self.costs[-1]
            if math.isfinite(previous) and current > previous * (1 + self.settings.stop_increase):
                self.stop_reason = (
                    f"LOOCV cost rose {100 * (current / previous - 1):.0f} % ({previous:.1f} -> {current:.1f})"
                )

    def choice(self) -> SurrogateChoice:
        """The surrogate selected on the observations so far."""
        return select_surrogate(self.observations, self.settings.selection)

    def _point_costs(self) -> list[float]:
        """Cost attached to each measured point: the bootstrap's cost for the corners, then Eq. 9."""
        bootstrap = len(self._corners)
        first = self.costs[0] if self.costs else math.inf
        values = [first] * min(bootstrap, len(self._points)) + self.costs[1:]
        finite = [v for v in values if math.isfinite(v)]
        fill = max(finite) if finite else 1.0
        return [v if math.isfinite(v) else fill for v in values]

    def _normalise(self, points: np.ndarray) -> np.ndarray:
        low = np.array([self.task_slots[0], self.memory_mb[0]], dtype=float)
        span = np.array([self.task_slots[-1], self.memory_mb[-1]], dtype=float) - low
        return (points - low) / np.where(span > 0, span, 1.0)

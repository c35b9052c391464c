"""The knowledge document's schema: every field the agent writes, typed, so a stored document is read field by field.

The document is untrusted input (anyone who may edit the ConfigMap or the file wrote it). Every store
validates it with :func:`validate_document` before the agent sees it; a field that does not fit (a
wrong type, a number that is NaN, infinite, negative where a count is meant, an unknown key) makes the
whole document unusable, and the store moves it aside byte for byte, as it does with one that is not
JSON. The forecaster's own model state is validated by its schema in ``models.forecast.states`` when it
is built (``WorkloadForecaster.restore``), which fails the restore the same way.

Unknown keys are refused rather than ignored: a document this Perdix half understands would be saved
back without what it did not read. A newer Perdix that adds fields bumps ``version``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.observation import MAX_RATE
from models.forecast.states import MAX_SAMPLES, Bool, FiniteFloat, GappedSeries, Int, Str

Count = Annotated[Int, Field(ge=0)]
"""A non-negative whole number (samples, loops, fits)."""
Parallelism = Annotated[Int, Field(ge=0, le=32_768)]
"""A scale-out a Flink job can run at (Flink's upper bound on max parallelism is 2^15)."""
Moment = Annotated[FiniteFloat, Field(ge=0)]
"""An epoch second (or, in a replay, seconds since its start)."""
Seconds = Annotated[FiniteFloat, Field(ge=0)]
NonNegative = Annotated[FiniteFloat, Field(ge=0)]
"""A finite number at least zero (a variance's moment, a capacity, a sum of readings)."""
Rate = Annotated[FiniteFloat, Field(ge=0, le=MAX_RATE)]
"""Records a second: a capacity, a workload. Above what any job reports (``agent.observation.MAX_RATE``) it was not
written by the agent."""
RateSeries = Annotated[list[Rate | None], Field(max_length=MAX_SAMPLES)]
"""A workload's samples (``null`` marks a gap)."""
MOMENT_SLACK_S = 300.0
"""How far after the agent's clock a stored moment may lie (another pod's clock running ahead) before the document
is refused: a rescale stored as a day ahead would hold every round in its grace until then."""
ScaleOutKey = Annotated[Str, Field(pattern=r"^[1-9]\d{0,4}$")]
"""A scale-out as a JSON object key."""
Name = Annotated[Str, Field(max_length=253)]
RecoveryKind = Literal["rescale", "failure"]


class _Part(BaseModel):
    """Strict about shape: unknown fields are refused; leaf types are strict (no numbers read from strings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RegressionState(_Part):
    """``models.regression.WelfordRegression``."""

    n: Count
    mean_x: FiniteFloat
    mean_y: FiniteFloat
    m2_x: NonNegative
    m2_y: NonNegative
    c_xy: FiniteFloat
    skipped: Count = 0
    min_samples: Count = 2
    min_x_variance: NonNegative = 0.0

    @model_validator(mode="after")
    def _a_line_of_real_readings(self) -> RegressionState:
        # Every line the agent fits is of loads, seconds or rates: its means are within what a job reports, and a
        # covariance never exceeds the product of the spreads (Cauchy-Schwarz). A line outside either overflowed
        # to infinity within rounds and could never be saved again.
        if abs(self.mean_x) > MAX_RATE or abs(self.mean_y) > MAX_RATE:
            raise ValueError(f"a mean beyond {MAX_RATE:g}")
        if self.c_xy * self.c_xy > self.m2_x * self.m2_y * (1 + 1e-9) + 1e-9:
            raise ValueError("a covariance beyond the product of the spreads")
        return self


class SharesState(_Part):
    """The workers' shares of the throughput at one scale-out (``models.capacity``)."""

    workers: list[Name]
    sums: dict[Name, FiniteFloat]
    seconds: Count


class CapacityState(_Part):
    """``models.capacity.CapacityModel``."""

    max_cpu: Annotated[FiniteFloat, Field(gt=0, le=1)] = 1.0
    min_samples: Count = 30
    min_cpu_std: NonNegative = 0.02
    saturated_cpu: Annotated[FiniteFloat, Field(gt=0, le=1)] = 0.95
    min_known_fraction: Annotated[FiniteFloat, Field(ge=0, le=1)] = 0.5
    prior: dict[ScaleOutKey, Rate] = Field(default_factory=dict)
    partitions: Annotated[Int, Field(ge=1)] | None = None
    partition_weights: list[Annotated[FiniteFloat, Field(ge=0, le=1)]] | None = None
    regressions: dict[Name, RegressionState] = Field(default_factory=dict)
    last_seen: dict[Name, Moment] = Field(default_factory=dict)
    ratios: dict[Name, tuple[NonNegative, NonNegative]] = Field(default_factory=dict)
    """Per worker: decayed sums of throughput and of load over its loaded seconds."""
    light_ratios: dict[Name, tuple[NonNegative, NonNegative]] = Field(default_factory=dict)
    """The same over its light seconds."""
    observed: dict[ScaleOutKey, Rate] = Field(default_factory=dict)
    shares: dict[ScaleOutKey, SharesState] = Field(default_factory=dict)
    workers: list[Name] = Field(default_factory=list)
    skipped: Count = 0


class EstimateRow(_Part):
    """One downtime estimate at one scale-out (``models.recovery``)."""

    kind: RecoveryKind
    parallelism: Parallelism
    value: Seconds
    count: Count


class Estimate(_Part):
    value: Seconds
    count: Count


class RecoveryState(_Part):
    """``models.recovery.RecoveryPredictor``."""

    checkpoint_interval_s: Annotated[FiniteFloat, Field(gt=0)]
    priors: dict[RecoveryKind, Seconds]
    per_scale_out: list[EstimateRow] = Field(default_factory=list)
    per_kind: dict[RecoveryKind, Estimate] = Field(default_factory=dict)
    lines: dict[RecoveryKind, RegressionState] = Field(default_factory=dict)
    unexplained: Count = 0


class StatsState(_Part):
    """``models.anomaly.WelfordStats``."""

    n: Count
    mean: FiniteFloat
    m2: NonNegative


class DetectorState(_Part):
    """``models.anomaly.GapAnomalyDetector``."""

    k: Annotated[FiniteFloat, Field(gt=0)]
    min_samples: Count
    smoothing_s: Annotated[Int, Field(ge=1, le=86_400)]
    stats: StatsState
    skipped: Count = 0
    recent: Annotated[list[FiniteFloat], Field(max_length=86_400)] = Field(default_factory=list)


class WatchState(_Part):
    """``models.anomaly.RecoveryWatch``."""

    detector: DetectorState
    consecutive_s: Count
    give_up_s: Seconds
    active: Bool
    started_at: FiniteFloat | None
    abandoned: Count = 0
    seen_anomaly: Bool
    resumed_at: FiniteFloat | None = None
    run_start: FiniteFloat | None
    run_length: Count


class WatchedState(_Part):
    """``agent.analyze.WatchedRecovery``."""

    kind: RecoveryKind
    started_at: FiniteFloat
    parallelism: Parallelism
    predicted_s: FiniteFloat | None = None
    downtime_s: Seconds | None = None
    downtime_source: Literal["scaler", "uptime", "down"] | None = None
    overdue: Bool = False
    falling_behind: Bool = False
    from_parallelism: Parallelism | None = None
    episode_started_at: FiniteFloat | None = None


class SeasonalNaiveState(_Part):
    """``models.forecast.candidates.SeasonalNaive``."""

    history: GappedSeries
    period_s: Annotated[Int, Field(ge=1)] | None = None


class ScoresState(_Part):
    """``models.forecast.candidates.RollingScores``."""

    scores: dict[Name, list[NonNegative]] = Field(default_factory=dict)


class ForecasterState(_Part):
    """``models.forecast.WorkloadForecaster`` (its model's own state: ``models.forecast.states``)."""

    horizon_s: Annotated[Int, Field(ge=1, le=86_400)]
    window_s: Annotated[Int, Field(ge=1, le=7 * 86_400)]
    resolution_s: Annotated[Int, Field(ge=1, le=3600)]
    raw: RateSeries
    buckets: RateSeries
    bucket_count: Count
    partial: RateSeries
    last_wape: NonNegative | None = None
    poor_loops: Count = 0
    fits_started: Count = 0
    fits_failed: Count = 0
    skipped: Count = 0
    model: dict[str, object] | None = None
    seasonal: SeasonalNaiveState | None = None
    scores: ScoresState | None = None


class EnvelopeState(_Part):
    """``models.forecast.envelope.RiseEnvelope``."""

    levels: RateSeries


class AnalyzerState(_Part):
    """``agent.analyze.Analyzer``: the models' states and the bookkeeping that feeds them."""

    capacity: CapacityState
    forecaster: ForecasterState
    recovery: RecoveryState
    watch: WatchState
    watch_meta: WatchedState | None = None
    last_uptime: tuple[FiniteFloat, Seconds] | None = None
    expected_parallelism: Parallelism | None = None
    watch_signal: Name | None = None
    envelope: EnvelopeState | None = None


class RescaleRecord(_Part):
    """One rescale the agent applied or proposed (``agent.rescales.Rescale``, kept by ``RescaleHistory``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    at: FiniteFloat
    from_: Parallelism | None = Field(alias="from")
    to: Parallelism
    confirmed: Parallelism | None = None
    dry_run: Bool = False
    predicted_recovery_s: FiniteFloat | None = None
    downtime_s: FiniteFloat | None = None
    reasons: list[Annotated[Str, Field(max_length=10_000)]] = Field(default_factory=list, max_length=100)
    pending: Bool = False
    """Requested, but the daemon stopped before the scale target confirmed it; the next start reads the outcome."""
    vertices: dict[Name, tuple[Parallelism, Parallelism]] | None = None
    """A per-vertex rescale (``agent.per_operator``): each changed vertex's parallelism before and after."""


class PolicyState(_Part):
    """What a policy asked to keep (its own shape, read by the policy; here: its name and an object)."""

    policy: Name
    state: dict[str, object]


class IneffectiveScaleOutRecord(_Part):
    """A scale-out that gained far less capacity than predicted (``agent.safeguards.IneffectiveScaleOuts``)."""

    at: Moment
    from_parallelism: Annotated[Int, Field(ge=1, le=32_768)]
    to_parallelism: Annotated[Int, Field(ge=1, le=32_768)]
    workload: NonNegative
    capacity_before: FiniteFloat
    predicted_capacity: FiniteFloat
    measured_capacity: FiniteFloat
    cause: Annotated[Str, Field(max_length=1_000)] | None = None
    vertex: Name | None = None
    """The job vertex's id under a per-vertex policy; None: the whole job."""


class LoopState(_Part):
    """``agent.loop.Agent``: the round's own bookkeeping."""

    last_round_at: FiniteFloat | None = None
    last_rescale_at: FiniteFloat | None = None
    rescales: list[RescaleRecord] = Field(default_factory=list, max_length=100_000)
    recommendations: list[tuple[FiniteFloat, Parallelism]] = Field(default_factory=list, max_length=100_000)
    policy_state: PolicyState | None = None
    ineffective_scale_outs: list[IneffectiveScaleOutRecord] = Field(default_factory=list, max_length=10_000)
    """The ineffective scale-outs the safeguards remember (a document without them: none)."""


class KnowledgeDocument(_Part):
    """The whole document: a schema version, the analyzer's states, the loop's bookkeeping."""

    version: Annotated[Int, Field(ge=1)]
    analyzer: AnalyzerState | None = None
    loop: LoopState = Field(default_factory=LoopState)

    @field_validator("analyzer", mode="before")
    @classmethod
    def _nothing_kept(cls, value: object) -> object:
        # An analyzer that learns nothing (the lab's oracle) keeps an empty object.
        return None if value == {} else value


def _non_finite(value: object, path: str = "") -> str | None:
    """The path of the first NaN or infinite number anywhere in ``value`` (the JSON parser accepts them)."""
    if isinstance(value, float):
        return path or "(document)" if not math.isfinite(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _non_finite(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _non_finite(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def validate_document(document: Mapping[str, object]) -> KnowledgeDocument:
    """The document read field by field; raises ValueError naming the first field that does not fit."""
    try:
        typed = KnowledgeDocument.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(document)"
        raise ValueError(f"{where}: {first['msg']} ({exc.error_count()} field(s) do not fit)") from None
    # The fields of no fixed shape (a policy's state, a model's own state) hold no NaN either: nothing writes one.
    found = _non_finite(document)
    if found is not None:
        raise ValueError(f"{found}: a number that is NaN or infinite")
    return typed


def moments(document: KnowledgeDocument) -> Iterator[tuple[str, float]]:
    """Every moment the document holds, with the field it is in: when things happened, by the clock that saved it."""
    loop = document.loop
    named = {"loop.last_round_at": loop.last_round_at, "loop.last_rescale_at": loop.last_rescale_at}
    yield from ((path, value) for path, value in named.items() if value is not None)
    yield from ((f"loop.rescales[{i}].at", record.at) for i, record in enumerate(loop.rescales))
    yield from ((f"loop.recommendations[{i}]", at) for i, (at, _) in enumerate(loop.recommendations))
    yield from ((f"loop.ineffective_scale_outs[{i}].at", r.at) for i, r in enumerate(loop.ineffective_scale_outs))
    analyzer = document.analyzer
    if analyzer is None:
        return
    yield from ((f"analyzer.capacity.last_seen.{w}", at) for w, at in analyzer.capacity.last_seen.items())
    if analyzer.last_uptime is not None:
        yield "analyzer.last_uptime", analyzer.last_uptime[0]
    watch = analyzer.watch
    for name in ("started_at", "resumed_at", "run_start"):
        value = getattr(watch, name)
        if value is not None:
            yield f"analyzer.watch.{name}", value
    if analyzer.watch_meta is not None:
        for name in ("started_at", "episode_started_at"):
            value = getattr(analyzer.watch_meta, name)
            if value is not None:
                yield f"analyzer.watch_meta.{name}", value


def check_moments(document: KnowledgeDocument, now: float) -> None:
    """Raises ValueError naming the first moment later than ``now`` by more than :data:`MOMENT_SLACK_S`: a document
    from the future was not saved by this job's agent, and its rescale would hold the loop until then."""
    for path, value in moments(document):
        if value > now + MOMENT_SLACK_S:
            raise ValueError(f"{path}: {value:g} is more than {MOMENT_SLACK_S:g} s after now ({now:g})")

"""Configuration of the embedded simulated Flink job.

Lives with the simulator (which imports nothing from the agent); the agent's settings tree embeds it
as its ``simulator`` section, so the YAML key and the PERDIX_SIMULATOR__* variables reach it.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_WORKER_RPS = 1e12
"""The most records/s one simulated worker processes: records are counted exactly in int64 and float64."""


class SimulatorSettings(BaseModel):
    """The embedded simulated Flink job (reactive mode, Kafka-like source)."""

    # No setting is infinite or NaN: the simulator counts records in int64 and draws from finite distributions.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    partitions: int = Field(
        36, le=100_000, description="Source partitions. From 1 to 100,000: the simulator keeps an offset per partition."
    )
    partition_weights: tuple[float, ...] | None = Field(
        None, description="Explicit relative partition weights (overrides partition_skew); length = partitions."
    )
    worker_speeds: tuple[float, ...] | None = Field(
        None, description="Explicit speed factor per worker index (overrides worker_speed_spread)."
    )
    workload_noise: float = Field(
        0.02,
        ge=0,
        le=10,
        description="Relative standard deviation of the per-second arrival rate around the trace. At most 10: "
        "beyond, the arrivals overflow.",
    )
    partition_skew: float = Field(
        0.1,
        ge=0,
        le=100,
        description="Zipf exponent of partition weights (0: uniform; 1: classic Zipf). At most 100: beyond, the "
        "weights overflow.",
    )
    worker_capacity_rps: float = Field(
        14000.0,
        gt=0,
        le=MAX_WORKER_RPS,
        description="Records/s one worker of speed 1.0 processes at 100 % CPU."
        " At most 1e12: records are counted exactly in int64 and float64.",
    )
    worker_speed_spread: float = Field(
        0.08, ge=0, lt=1, description="Standard deviation of the per-worker speed factor (heterogeneous workers)."
    )
    capacity_noise: float = Field(
        0.005, ge=0, description="Relative standard deviation of each worker's per-second capacity around its speed."
    )
    cpu_idle: float = Field(0.05, ge=0, lt=1, description="CPU load of an idle worker (JVM overhead), 0..1.")
    cpu_noise: float = Field(0.02, ge=0, description="Standard deviation of per-second CPU noise, 0..1.")
    metric_window_s: int = Field(
        30,
        ge=1,
        le=3600,
        description="Moving-average window of reported CPU and per-worker rates, seconds. At most an hour.",
    )
    checkpoint_interval_s: int = Field(10, ge=1, le=86_400, description="Checkpoint interval, seconds. At most a day.")
    rescale_downtime_base_s: float = Field(
        10.0, ge=0, le=86_400, description="Downtime of a rescale at parallelism 0, seconds. At most a day."
    )
    rescale_downtime_per_worker_s: float = Field(
        1.5,
        ge=0,
        le=86_400,
        description="Extra rescale downtime per worker of the larger scale-out, seconds. At most a day.",
    )
    rescale_aligned: bool = Field(
        False,
        description="Whether a rescale is aligned with a checkpoint that completes as the job stops (the flink-rest"
        " target's checkpoint_before_rescale): it replays nothing. A failure replays since the last checkpoint.",
    )
    failure_downtime_base_s: float = Field(
        8.0, ge=0, le=86_400, description="Downtime of a failure at parallelism 0, seconds. At most a day."
    )
    failure_downtime_per_worker_s: float = Field(
        0.5, ge=0, le=86_400, description="Extra failure downtime per worker, seconds. At most a day."
    )
    downtime_jitter: float = Field(
        0.15, ge=0, description="Log-normal sigma of downtime around its mean (0: deterministic)."
    )
    initial_parallelism: int = Field(
        8,
        ge=1,
        le=32_768,
        description="Scale-out the simulated job starts with."
        " At most Flink's limit on a job's max parallelism (32,768).",
    )
    seed: int = Field(
        7,
        ge=0,
        description=(
            "Seed of every random draw in the simulator. Arrivals, capacity noise and downtime jitter each come "
            "from their own stream keyed by (seed, second), so every policy replaying a trace faces the same ones."
        ),
    )
    failure_seed: int | None = Field(
        None,
        ge=0,
        description=(
            "Seed of the injected failure instants alone (None: seed). Another failure seed replays the same job "
            "and workload with failures at other moments, to tell a policy's luck from its judgement."
        ),
    )

    @property
    def failure_schedule_seed(self) -> int:
        """The seed the failure instants are drawn with."""
        return self.seed if self.failure_seed is None else self.failure_seed

    @model_validator(mode="after")
    def _can_run(self) -> SimulatorSettings:
        if self.partitions < 1:
            raise ValueError(f"partitions ({self.partitions}) must be at least 1")
        if self.initial_parallelism > self.partitions:
            raise ValueError(
                f"initial_parallelism ({self.initial_parallelism}) > partitions "
                f"({self.partitions}): a worker would have no partition"
            )
        if self.partition_weights is not None:
            if len(self.partition_weights) != self.partitions:
                raise ValueError(
                    f"partition_weights has {len(self.partition_weights)} entries, partitions is {self.partitions}"
                )
            if min(self.partition_weights) < 0 or sum(self.partition_weights) <= 0:
                raise ValueError("partition_weights must be non-negative with a positive sum")
            if not math.isfinite(sum(self.partition_weights)):
                raise ValueError("partition_weights must have a finite sum (they are relative: scale them down)")
        if self.worker_speeds is not None:
            if not self.worker_speeds:
                raise ValueError("worker_speeds must list at least one speed, or be unset")
            if min(self.worker_speeds) <= 0:
                raise ValueError("worker_speeds must all be positive")
            if max(self.worker_speeds) * self.worker_capacity_rps > MAX_WORKER_RPS:
                raise ValueError(
                    f"worker_speeds: a speed of {max(self.worker_speeds):g} at worker_capacity_rps "
                    f"{self.worker_capacity_rps:g} is over {MAX_WORKER_RPS:g} records/s a worker"
                )
        return self

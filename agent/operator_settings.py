"""Settings of the per-operator path: the per-vertex PromQL queries and the knobs of Justin and QEScalor.

The ``operators`` section of the agent's settings tree (``agent.settings.Settings.operators``), read when
the policy decides per job vertex (``planner.registry``) on a per-vertex scale target.
Every default needs only Flink's Prometheus reporter; the state queries answer only for vertices with
keyed state in RocksDB and with its native metrics and latency tracking switched on (see
docs/flink-metrics.md, "Per vertex"), and an empty answer there means "stateless", not a gap.

Series measured on Flink 2.3 and 1.20 (the same): task-scope ``numRecordsIn``/``numRecordsOut`` count what
a vertex (a chain of operators) takes in and emits, a source's ``numRecordsIn`` what it read; every task- and
operator-scope series carries ``task_id`` (the job vertex id of ``/jobs/{id}``) and ``subtask_index``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.promql import accumulated_time_rate, check_query

VERTEX_LABEL = "task_id"
"""Label that names a job vertex in Flink's task- and operator-scope series (its JobVertexID)."""
SUBTASK_LABEL = "subtask_index"
"""Label that names a subtask of a vertex."""

_JOB = 'job_name=~"{job}"'
_LABELS = f"{VERTEX_LABEL}, {SUBTASK_LABEL}"
_BY = f"sum by ({_LABELS})"
_BUSY = accumulated_time_rate("Busy", selector=_JOB, by=_LABELS)
_BACK_PRESSURED = accumulated_time_rate("BackPressured", selector=_JOB, by=_LABELS)
_TIME = f"({_BUSY} + {accumulated_time_rate('Idle', selector=_JOB, by=_LABELS)} + {_BACK_PRESSURED})"
_HITS = f"{_BY} (rate(flink_taskmanager_job_task_operator_rocksdb_block_cache_hit{{{_JOB}}}[{{window}}s]))"
_MISSES = f"{_BY} (rate(flink_taskmanager_job_task_operator_rocksdb_block_cache_miss{{{_JOB}}}[{{window}}s]))"


class _Section(BaseModel):
    # No setting is infinite or NaN (a non-finite threshold or cost compares false with everything).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


class OperatorQueries(_Section):
    """Per-subtask PromQL queries of every job vertex; each answers one series per (task_id, subtask_index).

    Placeholders as in ``prometheus.queries``: ``{window}``, ``{step}``, ``{job}``.
    """

    records_in: str = Field(
        f"{_BY} (rate(flink_taskmanager_job_task_numRecordsIn{{{_JOB}}}[{{window}}s]))",
        description="Records/s each subtask took in (a source: records it read). Needs: the tasks' numRecordsIn.",
    )
    records_out: str = Field(
        f"{_BY} (rate(flink_taskmanager_job_task_numRecordsOut{{{_JOB}}}[{{window}}s]))",
        description="Records/s each subtask emitted. Needs: the tasks' numRecordsOut.",
    )
    busy: str = Field(
        f"{_BUSY} / {_TIME}",
        description="Busy fraction (0..1) of each subtask: accumulated busy over busy + idle + back-pressured "
        "time. Needs: accumulateBusyTimeMs, accumulateIdleTimeMs, accumulateBackPressuredTimeMs.",
    )
    backpressure: str = Field(
        f"{_BACK_PRESSURED} / {_TIME}",
        description="Back-pressured fraction (0..1) of each subtask's time. Needs: the same three counters.",
    )
    state_size: str = Field(
        f"{_BY} (flink_taskmanager_job_task_operator_column_family_rocksdb_estimate_live_data_size{{{_JOB}}})",
        description="Bytes of live keyed state per subtask, over its column families. Needs: RocksDB and "
        "state.backend.rocksdb.metrics.estimate-live-data-size with column-family-as-variable.",
    )
    managed_memory_used: str = Field(
        f"max by ({VERTEX_LABEL}, {SUBTASK_LABEL}) "
        f"(flink_taskmanager_job_task_operator_column_family_rocksdb_block_cache_usage{{{_JOB}}})",
        description="Bytes of managed memory each subtask's RocksDB uses (its block cache, which holds the "
        "memtables too; every column family reports the shared cache). Needs: "
        "state.backend.rocksdb.metrics.block-cache-usage.",
    )
    cache_hit_rate: str = Field(
        f"{_HITS} / ({_HITS} + {_MISSES})",
        description="Share of block-cache lookups that hit, per subtask (Justin's cache hit rate). Needs: "
        "state.backend.rocksdb.metrics.block-cache-hit and block-cache-miss.",
    )
    state_latency: str = Field(
        f"max by ({VERTEX_LABEL}, {SUBTASK_LABEL}) "
        f'({{__name__=~"flink_taskmanager_job_task_operator_state_name_.*Latency",quantile="0.5",{_JOB}}}) / 1e6',
        description="Median keyed-state access latency per subtask, ms (the slowest state and access kind; "
        "Justin's state access latency). Needs: state.latency-track.keyed-state-enabled.",
    )

    _balanced = field_validator("*")(check_query)


REQUIRED_QUERIES = ("records_in", "records_out", "busy")
"""Queries every per-operator policy needs; the others may be empty (stateless vertices)."""


class OperatorSettings(_Section):
    """The per-operator path: per-vertex queries, the warm-up, and the knobs of Justin and QEScalor."""

    queries: OperatorQueries = Field(default_factory=OperatorQueries, description="Per-vertex PromQL queries.")
    warm_up_s: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="After a (re)start of the job, rounds only watch this long: rates over a window that "
        "reaches back before it mix the old attempt (DS2's warm-up), seconds."
        " At most a day.",
    )
    memory_min_mb: float = Field(
        128.0,
        gt=0,
        description="Justin's memory level 0: managed memory per slot of a stateful vertex, MB; each level doubles it.",
    )
    memory_max_level: int = Field(3, ge=1, le=10, description="Justin's maxLevel: memory levels 0 .. maxLevel - 1.")
    cache_hit_threshold: float = Field(
        0.8, ge=0, le=1, description="Justin: a stateful vertex below this block-cache hit rate is memory-bound."
    )
    latency_threshold_ms: float = Field(
        1.0, gt=0, description="Justin: a stateful vertex above this median state access latency is memory-bound, ms."
    )
    memory_cost_per_gb: float = Field(
        0.125, ge=0, description="QEScalor: price of 1 GB of slot memory relative to one CPU core."
    )
    startup_cost: float = Field(0.5, ge=0, description="QEScalor: cost of starting one subtask, in slot-minutes.")
    shutdown_cost: float = Field(0.25, ge=0, description="QEScalor: cost of stopping one subtask, in slot-minutes.")


__all__ = ["REQUIRED_QUERIES", "SUBTASK_LABEL", "VERTEX_LABEL", "OperatorQueries", "OperatorSettings"]

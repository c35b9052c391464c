"""Every scaling policy Perdix knows, described once.

A :class:`PolicySpec` says what a policy is called, how it is built (from its defaults, from the settings, at
another value of its main knob), which signals it reads, whether it plans one parallelism per job vertex, which
scale targets it runs on, and whether it runs in production or only in the lab (and why). Settings validation,
the Helm schema's enum, ``perdix run`` and ``perdix evaluate`` all read :data:`SPECS`; nothing else lists
policies by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.daedalus_per_operator import DaedalusPerOperator
from planner.ds2_per_operator import Ds2PerOperator
from planner.justin_per_operator import JustinPerOperator
from planner.oracle import OraclePolicy
from planner.peers import Ds2, FlinkAutoscaler, Hpa, KedaLag
from planner.qescalor_per_operator import QescalorPerOperator
from planner.types import Policy

PER_VERTEX_TARGETS: tuple[str, ...] = ("flink-rest", "flinkdeployment")
"""Scale targets that set the parallelism of each job vertex (Flink's REST API or a FlinkDeployment)."""

SIMULATED_TARGET = "simulated"
"""The lab's simulated job: the only target a lab-only policy runs on."""


class Signal(str, Enum):
    """What a policy reads beyond the workload, the parallelism and the backlog every round has."""

    FORECAST = "forecast"
    """The workload forecast over the horizon (the agent skips forecasting when no policy reads it)."""
    BUSY = "busy"
    """Each worker's busy time (Flink's busyTimeMsPerSecond)."""
    CPU = "cpu"
    """Each TaskManager's CPU load."""
    PARTITION_OFFSETS = "partition-offsets"
    """Each source partition's log-end and committed offsets (the lag per partition)."""
    VERTEX_METRICS = "vertex-metrics"
    """Every job vertex's subtask series and the job graph (the per-vertex policies)."""
    SIMULATOR_TRUTH = "simulator-truth"
    """The simulated job's true future, capacities and downtimes (only the lab has them)."""


class _Dumpable(Protocol):
    def model_dump(self) -> dict[str, Any]: ...


class PolicyOptions(Protocol):
    """The settings a policy takes its options from (``agent.settings.Settings`` is one)."""

    @property
    def keda_lag_threshold(self) -> int: ...

    @property
    def flink_autoscaler(self) -> _Dumpable: ...


@dataclass(frozen=True)
class PolicySpec:
    """One policy: its name, its forms, what it reads, where it runs."""

    name: str
    summary: str
    """What it does, in a clause (it ...), for the messages that name it."""
    whole_job: Callable[[], Policy] | None = None
    """The policy at its defaults planning one scale-out for the job; None: it only plans per vertex."""
    per_vertex: Callable[[], Policy] | None = None
    """The policy planning one parallelism per job vertex; None: it only plans the whole job."""
    signals: frozenset[Signal] = frozenset()
    lab_only: str | None = None
    """Why it runs only in the lab; None: ``perdix run`` runs it."""
    with_options: Callable[[PolicyOptions], Policy] | None = None
    """The whole-job policy with its options from the settings; None: it has none (its defaults)."""
    with_knob: Callable[[float], Policy] | None = None
    """The whole-job policy at another value of its main knob (the lab's sweeps); None: it has no knob here."""
    knob_setting: str | None = None
    """The setting the lab's sweeps move instead (Daedalus plans with the target recovery time); None: none."""

    @property
    def production(self) -> bool:
        """``perdix run`` runs it against a real job."""
        return self.lab_only is None

    @property
    def vertex_only(self) -> bool:
        """It has no whole-job form: it needs a target that sets each vertex (or the lab's operator-DAG testbed)."""
        return self.whole_job is None

    @property
    def targets(self) -> tuple[str, ...] | None:
        """The scale targets it runs on; None: every target."""
        if self.lab_only is not None:
            return (SIMULATED_TARGET,)
        return PER_VERTEX_TARGETS if self.vertex_only else None

    def plans_per_vertex(self, target: str) -> bool:
        """On ``target``, it plans one parallelism per job vertex (its per-vertex form, where the target sets
        vertices); otherwise one scale-out for the whole job."""
        return self.per_vertex is not None and target in PER_VERTEX_TARGETS

    def policy(self, options: PolicyOptions | None = None, *, knob: float | None = None) -> Policy:
        """The whole-job policy: at ``knob`` when given, with its options from ``options`` when given, else its
        defaults; KeyError when it has no whole-job form."""
        if self.whole_job is None:
            raise KeyError(
                f"policy {self.name!r} does not run on the single-vertex job: it {self.summary}; "
                "the lab runs it on the operator-DAG testbed"
            )
        if knob is not None and self.with_knob is not None:
            return self.with_knob(knob)
        if options is not None and self.with_options is not None:
            return self.with_options(options)
        return self.whole_job()

    def vertex_policy(self) -> Policy:
        """The per-vertex policy at its defaults; KeyError when it only plans the whole job."""
        if self.per_vertex is None:
            raise KeyError(
                f"policy {self.name!r} plans the whole job only; known per vertex: {', '.join(per_vertex())}"
            )
        return self.per_vertex()


def _flink_autoscaler(options: PolicyOptions) -> Policy:
    return FlinkAutoscaler(**options.flink_autoscaler.model_dump())


def _keda_lag(options: PolicyOptions) -> Policy:
    return KedaLag(options.keda_lag_threshold)


SPECS: Mapping[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        PolicySpec(
            "daedalus",
            "plans the smallest scale-out that recovers within the target (planner.daedalus)",
            whole_job=DaedalusPolicy,
            signals=frozenset({Signal.FORECAST}),
            knob_setting="target_recovery_time_s",
        ),
        PolicySpec(
            "static",
            "keeps a fixed scale-out (planner.daedalus.StaticPolicy)",
            whole_job=StaticPolicy,
        ),
        PolicySpec(
            "flink-autoscaler",
            "runs the Flink Kubernetes Operator's autoscaler on busy time (planner.flink_autoscaler)",
            whole_job=FlinkAutoscaler,
            signals=frozenset({Signal.BUSY}),
            with_options=_flink_autoscaler,
            with_knob=FlinkAutoscaler,
        ),
        PolicySpec(
            "ds2",
            "sizes each vertex by its true processing rate (planner.ds2, planner.ds2_per_operator)",
            whole_job=Ds2,
            per_vertex=Ds2PerOperator,
            signals=frozenset({Signal.BUSY, Signal.VERTEX_METRICS}),
            with_knob=Ds2,
        ),
        PolicySpec(
            "hpa",
            "runs the Kubernetes HPA on TaskManager CPU (planner.hpa)",
            whole_job=Hpa,
            signals=frozenset({Signal.CPU}),
            with_knob=Hpa,
        ),
        PolicySpec(
            "keda-lag",
            "runs KEDA's Kafka scaler on the partitions' lag (planner.keda)",
            whole_job=KedaLag,
            signals=frozenset({Signal.PARTITION_OFFSETS}),
            with_options=_keda_lag,
            with_knob=KedaLag,
        ),
        PolicySpec(
            "daedalus-per-operator",
            "plans one parallelism per job vertex (planner.daedalus_per_operator)",
            per_vertex=DaedalusPerOperator,
            signals=frozenset({Signal.FORECAST, Signal.VERTEX_METRICS}),
        ),
        PolicySpec(
            "justin",
            "decides per-vertex parallelism and memory levels from state-access metrics (planner.justin_per_operator)",
            per_vertex=JustinPerOperator,
            signals=frozenset({Signal.VERTEX_METRICS}),
        ),
        PolicySpec(
            "qescalor",
            "plans per-vertex parallelism and a TaskManager resource profile (planner.qescalor_per_operator)",
            per_vertex=QescalorPerOperator,
            signals=frozenset({Signal.FORECAST, Signal.VERTEX_METRICS}),
        ),
        PolicySpec(
            "oracle",
            "plans from the simulated job's true future (planner.oracle)",
            whole_job=OraclePolicy,
            signals=frozenset({Signal.FORECAST, Signal.SIMULATOR_TRUTH}),
            lab_only="it reads the simulator's true future, capacities and downtimes",
        ),
    )
}
"""Every policy by name, production ones first in the order they are listed to operators."""


def spec(name: str) -> PolicySpec:
    """The policy registered under ``name``; KeyError naming the known ones."""
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(SPECS))}") from None


def production() -> tuple[str, ...]:
    """The policies ``perdix run`` runs, in the order listed to operators."""
    return tuple(name for name, s in SPECS.items() if s.production)


def whole_job() -> tuple[str, ...]:
    """The policies with a whole-job form (those a replay of the simulated job can run), lab-only ones included."""
    return tuple(name for name, s in SPECS.items() if not s.vertex_only)


def vertex_only() -> tuple[str, ...]:
    """The policies with no whole-job form: they run on a per-vertex target or the lab's operator-DAG testbed."""
    return tuple(name for name, s in SPECS.items() if s.vertex_only)


def per_vertex() -> tuple[str, ...]:
    """The policies with a per-vertex form."""
    return tuple(name for name, s in SPECS.items() if s.per_vertex is not None)


def lab_only() -> tuple[str, ...]:
    """The policies only the lab runs."""
    return tuple(name for name, s in SPECS.items() if not s.production)

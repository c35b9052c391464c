"""The lab's settings: the agent's settings tree plus the embedded simulated job, and the lab-only policies.

``perdix simulate`` and ``perdix evaluate`` read this tree; ``perdix run`` reads the agent's, which has no
simulator section and rejects policies that need the simulator's truth or an operator-DAG testbed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from agent.settings import ScaleTargetKind, ScaleTargetSettings, Settings, load_settings
from planner import registry
from simulator import SimulatorSettings

LAB_POLICIES: tuple[str, ...] = registry.whole_job()
"""Single-vertex policies a replay can run: those with a whole-job form, the lab-only ones included."""


_IN_PLACE: Mapping[str, float | bool] = {
    "simulator.rescale_downtime_base_s": 1.0,
    "simulator.rescale_downtime_per_worker_s": 0.05,
    "downtime_rescale_prior_s": 2.0,
}
RESCALE_COSTS: Mapping[str, Mapping[str, float | bool]] = {
    "restart": {
        "simulator.rescale_downtime_base_s": 10.0,
        "simulator.rescale_downtime_per_worker_s": 1.5,
        "downtime_rescale_prior_s": 30.0,
    },
    "in-place": _IN_PLACE,
    "in-place-aligned": {**_IN_PLACE, "simulator.rescale_aligned": True},
}
"""What a rescale of the simulated job costs, by name (``--rescale-cost`` of ``perdix simulate``, ``perdix evaluate``
and the benchmarks): the simulated job's rescale downtime and the agent's prior for it before one was measured.

* ``restart`` (the defaults): Flink's reactive mode restarting with new pods, 10 s + 1.5 s per worker of the
  larger scale-out (about 30 s at 14 workers), then the replay of the records since the last checkpoint;
* ``in-place``: the REST API rescaling in place on the adaptive scheduler, which stops a real job for
  0.1-0.3 s (``benchmarks.bench_flink_rescale``): 1 s + 0.05 s per worker, the replay as above; the agent's prior
  for the downtime is cheap (``rescales_in_place``), so, its loop unset, it runs a round every 30 s as on the
  flink-rest target;
* ``in-place-aligned``: the same with each rescale aligned with a checkpoint triggered for it, as the flink-rest
  target does by default (``scale_target.checkpoint_before_rescale``): no replay, and the agent knows it
  (``rescales_aligned``). On the real job aligned rescales replayed 0.04-0.09 s of records against 5 s
  (docs/research/rescale-checkpoint-alignment.md).

Failures cost the same in every profile (a TaskManager is lost either way)."""

RESCALE_COST_DEFAULT = "restart"
"""The profile the lab's settings describe without ``--rescale-cost``."""


def rescale_cost_overrides(name: str | None) -> dict[str, float | bool]:
    """The dotted setting overrides of a :data:`RESCALE_COSTS` profile (``{}`` for None); ValueError naming the
    known profiles for any other name."""
    if name is None:
        return {}
    if name not in RESCALE_COSTS:
        raise ValueError(f"unknown rescale cost {name!r}; known: {', '.join(RESCALE_COSTS)}")
    return dict(RESCALE_COSTS[name])


def rescale_cost_of(settings: LabSettings) -> dict[str, Any]:
    """What a rescale of the simulated job costs under these settings, as a report records it: the profile of
    :data:`RESCALE_COSTS` the settings match (``custom`` when none does), the downtime's base and per-worker
    seconds, whether each rescale is aligned with a checkpoint, and the agent's downtime prior."""
    values: dict[str, float | bool] = {
        "simulator.rescale_downtime_base_s": settings.simulator.rescale_downtime_base_s,
        "simulator.rescale_downtime_per_worker_s": settings.simulator.rescale_downtime_per_worker_s,
        "simulator.rescale_aligned": settings.simulator.rescale_aligned,
        "downtime_rescale_prior_s": settings.downtime_rescale_prior_s,
    }
    profile = next(
        (
            name
            for name, overrides in RESCALE_COSTS.items()
            if all(values[key] == overrides.get(key, False) for key in values)
        ),
        "custom",
    )
    return {
        "profile": profile,
        "downtime_base_s": values["simulator.rescale_downtime_base_s"],
        "downtime_per_worker_s": values["simulator.rescale_downtime_per_worker_s"],
        "aligned": values["simulator.rescale_aligned"],
        "downtime_prior_s": values["downtime_rescale_prior_s"],
    }


class LabScaleTargetSettings(ScaleTargetSettings):
    """The agent's scale target, the embedded simulated job unless the lab drives a real one."""

    kind: ScaleTargetKind = Field(
        "simulated",
        description="Scale target type: the embedded simulated job, or what perdix run drives (a TaskManager "
        "Deployment or StatefulSet, a FlinkDeployment, Flink's REST API).",
    )


class LabSettings(Settings):
    """The agent's settings with the embedded simulated job it is replayed against."""

    runnable_policies: ClassVar[tuple[str, ...]] = LAB_POLICIES
    policy_context: ClassVar[str] = "a replay"
    refused_policies: ClassVar[dict[str, str]] = {
        name: f"runs on the operator-DAG testbed only ({spec.summary}; perdix evaluate --policies {name})"
        for name, spec in registry.SPECS.items()
        if spec.vertex_only
    }

    scale_target: LabScaleTargetSettings = Field(
        default_factory=LabScaleTargetSettings, description="Scale target: the simulated job by default."
    )
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings, description="Embedded simulated job.")

    @property
    def rescales_aligned(self) -> bool:
        """The simulated job's rescales are aligned with a checkpoint when its settings say so."""
        if self.scale_target.kind == "simulated":
            return self.simulator.rescale_aligned
        return super().rescales_aligned

    @model_validator(mode="after")
    def _simulated_partitions(self) -> LabSettings:
        # The simulated job's partitions are known: the agent is told them as an operator would set
        # source_partitions (a value set in the file or a flag wins).
        if self.source_partitions is None and self.scale_target.kind == "simulated":
            object.__setattr__(self, "source_partitions", self.simulator.partitions)  # frozen: set while validating
        return self


def load_lab_settings(config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> LabSettings:
    """:func:`agent.settings.load_settings` for the lab's tree (same sources, same one-line errors)."""
    return load_settings(config_file, overrides, model=LabSettings)

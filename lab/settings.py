"""The lab's settings: the agent's settings tree plus the embedded simulated job, and the lab-only policies.

``perdix simulate`` and ``perdix evaluate`` read this tree; ``perdix run`` reads the agent's, which has no
simulator section and rejects policies that need the simulator's truth or an operator-DAG testbed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from agent.settings import Settings, load_settings
from planner import DAG_ONLY_POLICIES, PRODUCTION_POLICIES
from simulator import SimulatorSettings

LAB_POLICIES: tuple[str, ...] = (*(p for p in PRODUCTION_POLICIES if p not in DAG_ONLY_POLICIES), "oracle")
"""Single-vertex policies a replay can run: the production ones with a single-vertex form, and the oracle."""


class LabSettings(Settings):
    """The agent's settings with the embedded simulated job it is replayed against."""

    runnable_policies: ClassVar[tuple[str, ...]] = LAB_POLICIES
    policy_context: ClassVar[str] = "a replay"
    refused_policies: ClassVar[dict[str, str]] = {
        name: f"runs on the operator-DAG testbed only ({reason}; perdix evaluate --policies {name})"
        for name, reason in DAG_ONLY_POLICIES.items()
    }

    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings, description="Embedded simulated job.")

    @property
    def partitions(self) -> int | None:
        """Source partitions: the setting, or on the simulated target the simulator's."""
        if self.source_partitions is not None:
            return self.source_partitions
        return self.simulator.partitions if self.scale_target.kind == "simulated" else None


def load_lab_settings(config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> LabSettings:
    """:func:`agent.settings.load_settings` for the lab's tree (same sources, same one-line errors)."""
    return load_settings(config_file, overrides, model=LabSettings)

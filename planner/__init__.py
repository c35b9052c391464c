"""Pure decision policies: ``decide(PlanInput, PlannerConfig) -> Decision``; nothing here does I/O."""

from collections.abc import Callable

from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.oracle import OraclePolicy
from planner.peers import Ds2, FlinkAutoscaler, Hpa, KedaLag
from planner.types import Decision, PlanInput, PlannerConfig, Policy

POLICY_FACTORIES: dict[str, Callable[..., Policy]] = {
    "daedalus": DaedalusPolicy,
    "static": StaticPolicy,
    "flink-autoscaler": FlinkAutoscaler,
    "hpa": Hpa,
    "keda-lag": KedaLag,
    "ds2": Ds2,
    "oracle": OraclePolicy,
}
"""Every single-vertex policy by name; a peer's factory takes its main knob (see ``planner.peers``)."""

POLICIES: dict[str, Policy] = {name: factory() for name, factory in POLICY_FACTORIES.items()}
"""Each policy with its defaults."""

DAG_ONLY_POLICIES: dict[str, str] = {
    "justin": "needs per-operator memory levels and state-access metrics (planner.justin, operator-DAG testbed)",
    "qescalor": "needs instances with different CPU/memory provisions (planner.qescalor, operator-DAG testbed)",
}
"""Policies that decide per operator and resource provision, so they run on the operator-DAG testbed only."""

PRODUCTION_POLICIES: tuple[str, ...] = ("daedalus", "static", "flink-autoscaler", "ds2", "hpa", "keda-lag")
"""Policies ``perdix run`` can run against a real job."""

LAB_ONLY_POLICIES: dict[str, str] = {
    "oracle": "it reads the simulator's true future, capacities and downtimes",
    **DAG_ONLY_POLICIES,
}
"""Policies that exist only in the lab, with the reason."""


def get_policy(name: str) -> Policy:
    """The policy registered under ``name``; raises KeyError naming the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        if name in DAG_ONLY_POLICIES:
            raise KeyError(
                f"policy {name!r} does not run on the single-vertex job: {DAG_ONLY_POLICIES[name]}"
            ) from None
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None


__all__ = [
    "POLICY_FACTORIES",
    "DAG_ONLY_POLICIES",
    "LAB_ONLY_POLICIES",
    "PRODUCTION_POLICIES",
    "POLICIES",
    "DaedalusPolicy",
    "Decision",
    "OraclePolicy",
    "PlanInput",
    "PlannerConfig",
    "Policy",
    "StaticPolicy",
    "get_policy",
]

"""Pure decision policies: ``decide(PlanInput, PlannerConfig) -> Decision``; nothing here does I/O."""

from planner.baselines import HpaPolicy, KedaLagPolicy
from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.ds2 import Ds2Policy
from planner.oracle import OraclePolicy
from planner.types import Decision, PlanInput, PlannerConfig, Policy

POLICIES: dict[str, Policy] = {
    "daedalus": DaedalusPolicy(),
    "static": StaticPolicy(),
    "ds2": Ds2Policy(),
    "hpa": HpaPolicy(),
    "keda-lag": KedaLagPolicy(),
    "oracle": OraclePolicy(),
}

DAG_ONLY_POLICIES: dict[str, str] = {
    "justin": "needs per-operator memory levels and state-access metrics (planner.justin, operator-DAG testbed)",
    "qescalor": "needs instances with different CPU/memory provisions (planner.qescalor, operator-DAG testbed)",
}
"""Policies that decide per operator and resource provision, so they run on the operator-DAG testbed only."""

PRODUCTION_POLICIES: tuple[str, ...] = ("daedalus", "static", "ds2", "hpa", "keda-lag")
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
    "DAG_ONLY_POLICIES",
    "LAB_ONLY_POLICIES",
    "PRODUCTION_POLICIES",
    "POLICIES",
    "DaedalusPolicy",
    "Decision",
    "Ds2Policy",
    "HpaPolicy",
    "KedaLagPolicy",
    "OraclePolicy",
    "PlanInput",
    "PlannerConfig",
    "Policy",
    "StaticPolicy",
    "get_policy",
]

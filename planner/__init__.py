"""Pure decision policies: ``decide(PlanInput, PlannerConfig) -> Decision``; nothing here does I/O."""

from collections.abc import Callable

from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.daedalus_per_operator import DaedalusPerOperator
from planner.ds2_per_operator import Ds2PerOperator
from planner.justin_per_operator import JustinPerOperator
from planner.oracle import OraclePolicy
from planner.peers import Ds2, FlinkAutoscaler, Hpa, KedaLag
from planner.per_operator import OperatorPolicy
from planner.qescalor_per_operator import QescalorPerOperator
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

OPERATOR_POLICY_FACTORIES: dict[str, Callable[..., OperatorPolicy]] = {
    "ds2": Ds2PerOperator,
    "daedalus-per-operator": DaedalusPerOperator,
    "justin": JustinPerOperator,
    "qescalor": QescalorPerOperator,
}
"""Every per-operator policy by name (one parallelism per job vertex; see ``planner.per_operator``).

``ds2`` has both forms: per vertex where the scale target sets vertices (flink-rest, flinkdeployment),
whole-job (``POLICY_FACTORIES``) on a reactive-mode TaskManager workload and on the simulated job."""

DAG_ONLY_POLICIES: dict[str, str] = {
    "daedalus-per-operator": "plans one parallelism per job vertex (planner.daedalus_per_operator)",
    "justin": "decides per-vertex parallelism and memory levels from state-access metrics "
    "(planner.justin_per_operator)",
    "qescalor": "plans per-vertex parallelism and a TaskManager resource profile (planner.qescalor_per_operator)",
}
"""Policies with no single-vertex form: the lab replays them on the operator-DAG testbed only (``perdix run`` runs
them against a real job graph)."""

PER_VERTEX_TARGETS: tuple[str, ...] = ("flink-rest", "flinkdeployment")
"""Scale targets that set the parallelism of each job vertex, which the per-operator policies need."""

PRODUCTION_POLICIES: tuple[str, ...] = (
    "daedalus",
    "static",
    "flink-autoscaler",
    "ds2",
    "hpa",
    "keda-lag",
    "daedalus-per-operator",
    "justin",
    "qescalor",
)
"""Policies ``perdix run`` can run against a real job (those of ``DAG_ONLY_POLICIES`` on a per-vertex target)."""

LAB_ONLY_POLICIES: dict[str, str] = {
    "oracle": "it reads the simulator's true future, capacities and downtimes",
}
"""Policies that exist only in the lab, with the reason."""


def get_operator_policy(name: str) -> OperatorPolicy:
    """The per-operator policy registered under ``name`` with its defaults; KeyError naming the known ones."""
    try:
        return OPERATOR_POLICY_FACTORIES[name]()
    except KeyError:
        raise KeyError(
            f"no per-operator policy {name!r}; known: {', '.join(sorted(OPERATOR_POLICY_FACTORIES))}"
        ) from None


def get_policy(name: str) -> Policy:
    """The policy registered under ``name``; raises KeyError naming the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        if name in DAG_ONLY_POLICIES:
            raise KeyError(
                f"policy {name!r} does not run on the single-vertex job: it {DAG_ONLY_POLICIES[name]}; "
                "the lab runs it on the operator-DAG testbed"
            ) from None
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None


__all__ = [
    "POLICY_FACTORIES",
    "DAG_ONLY_POLICIES",
    "LAB_ONLY_POLICIES",
    "OPERATOR_POLICY_FACTORIES",
    "PER_VERTEX_TARGETS",
    "PRODUCTION_POLICIES",
    "POLICIES",
    "DaedalusPolicy",
    "Decision",
    "OraclePolicy",
    "PlanInput",
    "PlannerConfig",
    "Policy",
    "StaticPolicy",
    "get_operator_policy",
    "get_policy",
]

"""Pure decision policies: ``decide(PlanInput, PlannerConfig) -> Decision``; nothing here does I/O.

Every policy is described once in :mod:`planner.registry` (its forms, the signals it reads, the targets it runs on,
production or lab-only).
"""

from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.oracle import OraclePolicy
from planner.registry import SPECS, PolicySpec, Signal, spec
from planner.types import Decision, PlanInput, PlannerConfig, Policy

__all__ = [
    "SPECS",
    "DaedalusPolicy",
    "Decision",
    "OraclePolicy",
    "PlanInput",
    "PlannerConfig",
    "Policy",
    "PolicySpec",
    "Signal",
    "StaticPolicy",
    "spec",
]

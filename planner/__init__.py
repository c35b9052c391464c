"""Pure decision policies: ``decide(PlanInput, PlannerConfig) -> Decision``; nothing here does I/O."""

from planner.daedalus import DaedalusPolicy, StaticPolicy
from planner.types import Decision, PlanInput, PlannerConfig, Policy

POLICIES: dict[str, Policy] = {"daedalus": DaedalusPolicy(), "static": StaticPolicy()}


def get_policy(name: str) -> Policy:
    """The policy registered under ``name``; raises KeyError naming the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None


__all__ = ["POLICIES", "DaedalusPolicy", "Decision", "PlanInput", "PlannerConfig", "Policy", "StaticPolicy", "get_policy"]

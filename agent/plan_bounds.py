"""The planner's upper bound each round: ``max_parallelism`` lowered to what the scale target can run now (a
session cluster's free slots, the job's max parallelism) and to the job's quota (``safeguards.quota``).

:class:`PlanBounds` owns what it last read, so a bound that stays the same is logged once, not every round.
"""

from __future__ import annotations

from dataclasses import replace

from agent.logging import get_logger
from agent.ports import BoundedScaler, ResourceReporter, Scaler
from agent.safeguard_settings import QuotaSettings
from planner.safeguards import SlotResources, quota_slots
from planner.types import PlannerConfig


class PlanBounds:
    """The round's ``max_parallelism``: the configured one, lowered to the scale target's reach and to the quota."""

    def __init__(self) -> None:
        self.log = get_logger("perdix.loop")
        self._reach: int | None = None
        """The scale-out the scale target could run at most when it was below max_parallelism (logs changes)."""
        self._reach_unread = False
        self._quota: tuple[int | None, str | None] = (None, None)
        """The slots the quota allows and why, as last read (logs changes)."""
        self._slot_resources: SlotResources | None = None

    @property
    def quota(self) -> tuple[int | None, str | None]:
        """The slots the quota allows and why, as last read (None: no quota)."""
        return self._quota

    def round_config(self, config: PlannerConfig, *, quota: QuotaSettings, scaler: Scaler) -> PlannerConfig:
        """``config`` for this round: ``max_parallelism`` lowered to what ``scaler`` can run now (a session cluster's
        free slots, :meth:`FlinkRestScaler.reachable_parallelism`) where it says so, and to the job's quota."""
        reachable = self._reachable_config(config, scaler)
        cap = self._quota_cap(quota, scaler, configured=config.max_parallelism)
        if cap is None or cap >= reachable.max_parallelism:
            return reachable
        return replace(reachable, max_parallelism=max(cap, reachable.min_parallelism))

    def _quota_cap(self, quota: QuotaSettings, scaler: Scaler, *, configured: int) -> int | None:
        """The slots the quota allows this round (None: no quota), read through the target's per-slot resources."""
        if not quota.enabled:
            return None
        if (quota.cpu is not None or quota.memory_mb is not None) and isinstance(scaler, ResourceReporter):
            try:
                self._slot_resources = scaler.slot_resources()
            except Exception as exc:  # unread this round: the last figures read stand
                self.log.debug("planner.slot_resources_unread", error=f"{type(exc).__name__}: {exc}")
        cap, why = quota_slots(
            slots=quota.slots, cpu=quota.cpu, memory_mb=quota.memory_mb, per_slot=self._slot_resources
        )
        if (cap, why) != self._quota:
            if cap is not None:
                self.log.warning(
                    "planner.capped",
                    max_parallelism=cap,
                    configured=configured,
                    error=f"the job's quota allows {cap} slots ({why}): planning within it",
                )
            else:
                self.log.warning(
                    "planner.quota_unread",
                    error="the quota's CPU or memory cannot be read into slots: "
                    "the scale target reports no resources per slot",
                )
            self._quota = (cap, why)
        return cap

    def _reachable_config(self, config: PlannerConfig, scaler: Scaler) -> PlannerConfig:
        """``config`` lowered to the scale target's reach (see :meth:`round_config`)."""
        if not isinstance(scaler, BoundedScaler):
            return config
        configured = config.max_parallelism
        try:
            cap = scaler.reachable_parallelism(configured)
        except Exception as exc:  # unread this round: the last bound read stands (said once until it reads)
            if not self._reach_unread:
                self.log.warning("planner.reach_unread", error=f"{type(exc).__name__}: {exc}", kept=self._reach)
            self._reach_unread = True
        else:
            self._reach_unread = False
            reach = None if cap is None else max(config.min_parallelism, cap)
            reach = reach if reach is not None and reach < configured else None
            if reach != self._reach:
                if reach is not None:
                    self.log.warning(
                        "planner.capped",
                        max_parallelism=reach,
                        configured=configured,
                        error=f"the scale target can run the job at {cap} at most now (the cluster's free slots, "
                        f"the job's max parallelism): planning up to {reach}, not max_parallelism {configured}",
                    )
                else:
                    self.log.info("planner.uncapped", max_parallelism=configured)
                self._reach = reach
        return config if self._reach is None else replace(config, max_parallelism=self._reach)

"""The defaults the planner and the agent's settings share, stated once.

The agent's settings tree (``agent.settings.Settings``) takes its defaults of these knobs from here, and
:class:`planner.types.PlannerConfig`, the planner's projection of those settings, defaults to the same
values; the planner cannot import the agent, so both read this module.
"""

from __future__ import annotations

from typing import Final, Literal

Holds = Literal["cost", "fixed"]
"""How Daedalus times its holds: priced by what this job's rescales cost, or the settings as they are."""

LOOP_INTERVAL_S: Final = 60.0
"""Time between two rounds of the MAPE-K loop, seconds."""
IN_PLACE_LOOP_INTERVAL_S: Final = 30.0
"""The loop where a rescale is in place (the flink-rest target's default), seconds: a rescale stops the job for a
fraction of a second, so what limits how soon a wrong decision is undone is the loop itself, and the SLO lets a
running job fall behind for 60 s."""
GRACE_PERIOD_S: Final = 120.0
"""No new decision this long after a rescale (the job settles), seconds."""
RECENT_RESCALE_WINDOW_S: Final = 300.0
"""After a rescale within this window, keep the scale-out while it still carries the load, seconds."""
SCALE_DOWN_STABILIZATION_S: Final = 300.0
"""A lower scale-out must qualify this long before the agent scales in, seconds."""
HOLDS: Final[Holds] = "cost"
"""Holds priced by the rescales' cost where a rescale is cheap (``planner.daedalus``)."""

KEDA_LAG_THRESHOLD: Final = 50_000
"""The ``lagThreshold`` of the keda-lag policy, records of lag each replica is sized for: about 3.5 s of one
worker reading 14,000 records/s. KEDA's own default (10) suits consumers of a few records per second; on a
job of 100k records/s it pins the scale-out at the partition cap, which no operator would run."""

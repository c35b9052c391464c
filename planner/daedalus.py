"""Daedalus Algorithm 1: the smallest scale-out that carries the workload and recovers in time.

Paper 001, section 3.2. For each candidate scale-out ``i`` from min to max:

1. ``C_i > W_avg``: it carries the workload observed since the last loop (reactive check);
2. ``RT_i <= RT_target``: its predicted recovery after a rescale to it (or a failure at it) is in time;
3. ``C_i >= max TSF over [now, now + RT_i]``: it carries the forecast while recovering (where a rescale is
   cheap, while the rescale itself recovers: :data:`RECOVERING_OVER`);
4. if ``i`` is the current scale-out, keep it;
5. if ``i`` is below the current one and the consumer lag exceeds ``C_i``, the job is still catching
   up: wait rather than scale in;
6. ``C_i > max TSF`` over the whole horizon when scaling out (one scale-out to what carries the
   forecast peak, not a staircase; while the workload rises, also the rise envelope's peak until the
   agent can act again), and over the *hold* of a scale-in when scaling in: its recovery
   plus the time until the agent can act again and its next decision has landed (grace period or
   loop interval, then a loop). A scale-in only has to last until the agent can undo it in time;
   asking it to carry the whole horizon's peak keeps a job with a daily cycle at its peak size. Where a
   rescale is cheap a scale-out is sized on its hold too (:data:`SCALE_OUT_SIZED_ON`): the next round
   adds workers again for a second's stop, and a scale-in's hold starts from its rescale's own recovery
   (:data:`HOLD_FROM`). On a climb a scale-out carries the climb continued until the agent can act on it again
   where that is more (:data:`CLIMB_CARRIED`, :data:`CLIMB_OVER`).

Before the search, a job rescaled within the recent-rescale window keeps its scale-out while it
carries the average workload and the forecast until the next loop, wanting the scale-in the search would take
(:data:`RECENT_WANTS`), so the stabilization runs beside the window; where a rescale is cheap the window and the
current scale-out must also carry a climb continued to the next round (:data:`CURRENT_CARRIES_CLIMB`). Guards added
for production: no decision in the grace period after a rescale, nor while recovering unless the current scale-out can
no longer finish the recovery in time, on a climb with the climb continued (:func:`cannot_catch_up`), unknown data
keeps the current scale-out, and scale-in waits until the lower scale-out has been wanted for the whole stabilization
window (HPA style), so a workload hovering at a threshold does not flap. The windows' settings default to
the default target recovery time (300 s), the time scale the SLO judges on, and the grace to two loops; with
``holds: cost`` (the default) and a cheap rescale (:data:`CHEAP_RESCALE_TARGET`, an in-place rescale of a second)
those are ceilings, and each wait is what this job's rescales cost, measured (:func:`holds`,
:func:`stabilization_s`): about a loop; a dear rescale (a restart of tens of seconds) keeps the settings
(:data:`HOLDS_PRICED_DEAR`). Where a
rescale is cheap a scale-in wanted through its whole window is taken to the newest wish, not the highest wanted
(:data:`STABILIZED_TO`).
Where a rescale is dear, a scale-in must stay ready for a failure through its hold (:data:`READY_THROUGH_HOLD`): the
upper bound's peak over the hold at most the workload at which a failure at the smaller scale-out still recovers
in time. A scale-in must also pay for itself (:func:`_unpaid`): the workers it saves over the time the point
forecast says it lasts exceed its rescale's cost, and the cost of the rescale back when the forecast says it will
be undone.
While the workload rises — the last loop's average runs more than :data:`RISING_MARGIN` above the forecast for the
next loop (the forecast is behind a rise) or more than :data:`CLIMB_MARGIN` above the loop before — a scale-in sized
on the forecast would meet the rest of the rise with the capacity it gave away: a forecast that is behind is raised by
its gap and the scale-ins are checked against that (:data:`RISE_GAP`, :data:`RISE_GAP_WHERE`), and a climb is
compounded over each scale-in's hold, which it must carry too (:data:`CLIMB_ON_SCALE_IN`). A climb is a rise past
the margin and past three spreads of the workload's own loop-to-loop noise (:data:`CLIMB_NOISE_Z`). If nothing
qualifies, the
scale-out with the shortest predicted recovery is chosen among the current one and those of more capacity, and among
equals the highest capacity (the paper returns the maximum, which on a job whose capacity stops growing is no better,
costs the most, and may carry less; :data:`FALLBACK_FROM`).

``DaedalusPolicy.decide`` reads as its stages: the round's holds, guards, the recent-rescale hold, the
candidate search, the fallback, stabilization.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from planner import guards
from planner.types import Decision, PlanInput, PlannerConfig, ReasonCode, decided, keep


RISING_MARGIN = 0.05
"""How far the last loop's average workload may run above the forecast for the next loop before a
scale-in waits: a margin for the noise of a minute's mean (at 0 the workload is above its forecast
half the time, and half of all scale-ins would wait; the value is chosen in docs/research/experiments.md,
experiment 2)."""


CLIMB_MARGIN = 0.10
"""How far the last loop's average workload may run above the loop before's and still not count as rising.
A forecast fitted on the old level can follow a steep ramp closely enough for the margin above, while
the workload climbs 10-20 % a loop (a diurnal ramp on nyc_flights_daily, a scale-in 14 -> 9 into it):
no scale-in then, and a scale-out carries the rise envelope (the value: docs/research/experiments.md,
experiment 3)."""


CLIMB_NOISE_Z: float | None = 3.0
"""How many of the workload's own loop-to-loop noise spreads (:attr:`PlanInput.workload_noise`, read once the last hour
is kept whole) a rise over the loop before must pass, beside :data:`CLIMB_MARGIN`, to count as a climb for the
decisions :data:`CLIMB_NOISE_FOR` names; None: the margin alone. On a workload whose minute means move by tens of
percent either way a rise of a tenth is noise as often as not, and a restart's scale-out that took it for a climb
carried it continued over its hold (noisy_flat, 60,000/s with 15 % noise a minute: 8 -> 13 workers on a rise of
23 %). On a calm workload the margin is the larger and nothing changes. At a restart's cost the dev half spent
0.80 % fewer worker-hours (mpls_police_stops -9 %) and the held-out half 0.46 %, the worst traces 2.583x -> 2.558x
and 2.698x -> 2.592x the failure-robust floor, with the same misses; in place 0.08-0.20 % fewer (seed 7;
docs/research/experiments.md, experiment 55)."""

CLIMB_NOISE_FOR = "every"
"""Which decisions read a climb against the noise (:data:`CLIMB_NOISE_Z`): ``every``, or ``scale-out`` (what a
scale-out and a kept scale-out carry, the rise a scale-out plans for and the recovery guard's climb, while the
scale-ins read every rise past the margin as a climb). A rise taken for noise lets a scale-in go at the foot of a
climb, which a restart then meets late: with the noise read from the job's first half hour, every decision cost the
dev half 7 -> 10 avoidable misses (mpls_police_stops, a scale-in 9 -> 5 at a rise of 58 %). Read from the whole hour
(``agent.analyze.forecasting.NOISE_WHOLE_SPAN``) the scale-ins lost nothing to it: -0.80 % against -0.75 % for the
scale-outs alone, the same misses (experiment 55)."""


SUSTAINED_CLIMB_LOOPS: int | None = 3
"""A climb over this many loops (:attr:`PlanInput.workload_climb_from`): the last loop's average above the one this
many loops before by more than the climb margin, each loop since above the one before it, is a climb too, at its
mean rate, where no loop alone rose past the margin; None: a climb over the loop before alone. A ramp of 6-8 % a
loop passes no loop's margin, and a forecast that lags it sized a restart's scale-out on less than the ramp reached
before it had recovered (beaver_activity: 9 -> 12 at 100,000/s recovering in 221 s by the forecast, the workload at
115,000/s four minutes later, then 12 -> 14 and a miss). Read by the scale-outs, beyond the noise grown over the
loops, at a restart's cost the held-out half missed 29 times (15 avoidable) against 32 (18) for 0.11 % more
worker-hours, the dev half 11 (6) against 12 (7) for 0.21 % more (docs/research/experiments.md, experiment 58)."""

SUSTAINED_CLIMB_FOR = "scale-out"
"""Which decisions read a climb over several loops (:data:`SUSTAINED_CLIMB_LOOPS`): ``every``, or ``scale-out`` (as
:data:`CLIMB_NOISE_FOR` names them). Read by the scale-ins too, the dev half at a restart's cost spent 0.49 % more
worker-hours for the same misses as the scale-outs alone (0.27 %), both against one loop's noise (experiment 58)."""


SUSTAINED_CLIMB_WHERE = "dear"
"""Where a climb over several loops is read (:data:`SUSTAINED_CLIMB_LOOPS`): ``dear``, where the waits are not priced
(a rescale that is not cheap, or holds fixed by the settings), or ``always``. Where a rescale is cheap the next
round resizes a scale-out short of a ramp for a second's downtime: read there too, both halves in place spent 0.22 %
more worker-hours (seed 7) for the same miss (experiment 58)."""

SUSTAINED_NOISE_GROWS = True
"""Whether a climb over several loops must pass the noise's spread grown as a random walk's over them (times the
square root of the loops) rather than one loop's. On a bursty workload three rises in a row past one loop's noise
are a burst's front as often as a ramp: against one loop's noise mpls_police_stops spent 5.6 % more at a restart's
cost, against the grown one 4.6 %, for the same misses (experiment 58)."""


SETTLE_LOOPS = 0.5
"""After a rescale's downtime, the part of a loop the readings need at the new scale-out before a decision
reads them (with ``holds: cost``): the workers' rates and busy fractions are averaged over windows of tens of
seconds (Flink's meters, Prometheus's rate windows, the simulated job's 30 s), so half a loop of them is the
new scale-out's. Protects against deciding on the old scale-out's readings; the recovery guard holds on
while the job catches up."""


CLIMB_ON_SCALE_IN = "compound"
"""What a climb over the loop before (:func:`_climbing`) does to a scale-in: ``compound``, the scale-in must carry the
climb compounded over its hold (the last loop's average times its ratio to the loop before's, once a loop) beside the
upper bound's peak there; ``carry``, the climb continued at the last loop's rate (:func:`_climb_over`); ``refuse``, no
scale-in that round. A climb is a relative rise: a job far above its workload (a large scale-out after a peak, the
workload back at a tenth of it and climbing again) refused every scale-in until the climb flattened, where the
scale-out the climb needs over the scale-in's hold is a fraction of the one it runs. Compounded, a climb of a loop is
taken to go on as it began, which a burst's onset does; continued at its rate, a restart's scale-in of several loops'
hold met the rest of a burst it had sized as a line (docs/research/experiments.md, experiment 48)."""

CLIMB_ON_SCALE_IN_WHERE = "always"
"""Where :data:`CLIMB_ON_SCALE_IN` applies: ``always``, or ``cheap`` (where a rescale is cheap; a dear rescale's
climb refuses every scale-in)."""


RISE_GAP_WHILE_FALLING = True
"""Whether the workload running above the forecast for the next loop counts as rising while it fell over the
loop before. A forecast that follows a descent expects more of it and runs below the last loop; that gap
is no rise behind the forecast."""

RISE_GAP = "lift"
"""What the workload running above the forecast for the next loop (:func:`_behind`) does to a
scale-in (where :data:`RISE_GAP_WHERE` says): ``lift`` raises the forecast and its upper bound by the gap (the last
loop's average over the forecast for the next loop) and takes a scale-in that still carries the raised bound over
its hold; ``veto`` refuses every scale-in that round. A forecast behind the workload is corrected by what it is
behind, not obeyed nor ignored; a climb over the loop before still refuses. In place the lift cut 1.0 % of the dev
half's worker-hours and, with :data:`SCALE_OUT_SIZED_ON`, 1.8 % of the held-out half's, with no miss more
(docs/research/experiments.md, experiment 17)."""

RISE_GAP_WHERE = "always"
"""Where :data:`RISE_GAP` applies: ``always``, or ``cheap`` (where a rescale is cheap; a dear rescale's round then
vetoes every scale-in on the gap). At a restart's cost the veto held the job through the descent after a rise
the forecast lagged, and the lift cut 1.1 % of the dev half's worker-hours with 15 -> 12 avoidable misses
(docs/research/experiments.md, experiment 39)."""

RISE_GAP_BY = "ratio"
"""How :data:`RISE_GAP`'s lift raises the forecast: ``ratio``, by the last loop's average over the forecast for the
next loop (the forecast's shape scaled); ``level``, by their difference (the forecast's shape shifted). A forecast
that falls toward zero under a flat workload (an ARIMA extrapolating a step down) has no ratio to scale by, and a
scale-in there is refused until the forecast recovers; shifted, it holds the workload's level. The shift was
neutral on the dev half in place (1.089x the floor either way, the same misses, 2.4 % more rescales), so the ratio
stands (docs/research/experiments.md, experiment 34)."""

SCALE_OUT_SIZED_ON = "hold"
"""What a scale-out carries where a rescale is cheap: ``hold``, the upper bound's peak over the decision's hold
(:func:`decision_hold_s`), as a scale-in does, since the next round can add workers again for a second's stop;
``horizon``, the point forecast's peak over the whole horizon (one scale-out, not a staircase), as a dear
rescale always does (docs/research/experiments.md, experiment 17)."""

CLIMB_CARRIED = True
"""Whether a scale-out on a climbing workload (:func:`_climbing`) carries the climb of the last loop continued over
its hold (the loop's average plus its climb per second times the hold) where that is above what it carries else
(where a rescale is cheap the upper bound's peak over the hold, where dear the forecast peak or the rise envelope;
:data:`CLIMB_CARRIED_WHERE`). A scale-out sized on its hold (:data:`SCALE_OUT_SIZED_ON`) carries the rise
envelope from the last minute's mean, which on a climb of several times a loop lags where the workload already
is, and the next rounds climb a staircase behind it (motorway_traffic: 2 -> 4 -> 12 workers while the workload
went from 14,000 to 80,000/s in two minutes, falling behind for 75 s). Carried, the dev half's misses went
from 7 to 1 for 0.7 % more worker-hours; with :data:`HOLD_FROM` ``scale-in`` too, to none at the same
worker-hours (docs/research/experiments.md, experiment 20)."""

CLIMB_OVER = "loop"
"""How far ahead a scale-out on a climb carries the climb continued where a rescale is cheap: ``loop``, to the next
round; ``next round``, a loop when the rescale's own recovery ends within it, else its whole hold; or ``hold``,
always its hold. A round after a cheap rescale reads where the climb went and adds workers for a second's stop. A
climb continued over the whole hold (its recovery and two loops) sized a burst's scale-out two to three times past
the burst's top (mpls_police_stops: 16 workers where 6-9 carried it; experiment 41). Carried a loop ahead always, a
climb that went on through a slow recovery was met in a staircase of scale-outs behind it while the recovery guard
held the agent's decisions (nile_flow, experiment 41), so ``next round`` fell back to the whole hold while the
rescale caught up. With the recovery judged against the climb (:data:`RECOVERY_UNDER_CLIMB`) and a kept scale-out
carrying it to the next round (:data:`CURRENT_CARRIES_CLIMB`), the agent acts on the climb at every round instead,
and a loop ahead always took the dev half's worst trace in place from 1.349x to 1.309x the failure-robust floor
with one avoidable miss fewer (docs/research/experiments.md, experiment 49)."""

RECENT_WANTS = "searched"
"""What a round held by the recent-rescale window records as wanted (where :data:`RECENT_WANTS_WHERE` says):
``searched``, the scale-in the candidate search would take (the job keeps its scale-out this round), so a scale-in
wanted in that round and the next is taken at the next, the stabilization's two rounds; ``kept``, the current
scale-out, so the stabilization starts only after the window. Where cheap the window and the stabilization each
last about a loop, and after a burst's scale-out ``kept`` took three rounds to come down where the readings asked
for it at the second; recorded, the dev half in place went from 1.307x to 1.298x the failure-robust floor on the
worst trace (docs/research/experiments.md, experiment 42)."""

RECENT_WANTS_WHERE = "always"
"""Where :data:`RECENT_WANTS` applies: ``always``, or ``cheap`` (where a rescale is cheap only). A dear rescale's
window of minutes holds its rounds for a reason of its own (a restart just made is not undone at once), not because a
smaller scale-out would not carry the load; with the rounds it holds wanting nothing, the stabilization's minutes began
only after the window's, and a burst's scale-out stood ten minutes after the burst. Counted, at a restart's cost the
dev half's worker-hours fell 1.2 % with 8 -> 6 avoidable misses and the held-out half's 1.4 % with 17 -> 18, the worst
traces 7-8 % lower (docs/research/experiments.md, experiment 45)."""

CLIMB_CARRIED_WHERE = "always"
"""Where :data:`CLIMB_CARRIED` applies: ``always``, or ``cheap`` (where a rescale is cheap only). A dear rescale
cannot be repeated before its grace has passed: a scale-out sized on a forecast still fitted on the level before
the climb left the job short through the next restart too (motorway_traffic and brent_oil_price: a miss on every
failure seed). Carried where dear too, with :data:`RISE_GAP_WHERE`, the dev half's avoidable misses at a restart's
cost went from 15 to 8 for 0.15 % more worker-hours (docs/research/experiments.md, experiment 39)."""

RECOVERY_UNDER_CLIMB = "cheap"
"""Where the recovery guard judges a recovery against the climb continued (:func:`cannot_catch_up`): ``cheap``
(where a rescale is cheap), ``always`` or ``off``. On a climb the arrivals a recovery must outrun grow by the last
loop's climb every second, so the spare capacity shrinks while the backlog drains; the guard yields when the backlog
cannot be drained within the target before the climb uses the spare up, or when the climb outruns the capacity
before the next round. Read on the arrivals of now, a recovery at a few percent of spare held the agent's decisions
while a climb went on through it (docs/research/experiments.md, experiments 41 and 49)."""

RECOVERY_LEFT_FROM = "stop"
"""What the recovery guard (:func:`cannot_catch_up`) gives a backlog to be worked off in: ``stop``, what is left of the
target since the recovery started (processing stopped); ``now``, the whole target from this round. The target counts
from the stop, so a recovery half through it with a backlog the spare works off in most of a target is already late.
With the drain measured where a rescale is cheap (:data:`RECOVERY_DRAIN_MEASURED`), no run of either half missed in
place over three failure seeds (two avoidable misses before), for 0.03 % more worker-hours; at a restart's cost the
held-out half's avoidable misses went from 15 to 13 for 0.13 % more (docs/research/experiments.md, experiment 60)."""

RECOVERY_DRAIN_MEASURED = "cheap"
"""Where the recovery guard (:func:`cannot_catch_up`) has a backlog worked off at the slower of the capacity's spare
over the arrivals and the rate it fell by over the last loop (``PlanInput.backlog_drain``), not at the spare alone,
while more than a second of input is left (less is a caught-up job's noise): ``cheap``, ``always`` or ``off``. On a
skewed job the last of a backlog sits on the busiest worker, which works it off with its own part of the spare: the
total backlog then falls several times slower than the job's spare says. Where a rescale is dear the search's
scale-out mid-recovery adds a restart's downtime and replay to the backlog it is meant to shorten: read there too, it
took a restart a loop sooner and one miss more on the dev half (experiment 60)."""

CURRENT_CARRIES_CLIMB = "cheap"
"""Where the current scale-out is kept only if it carries a climb (:func:`_climbing`) continued a loop ahead, as a
scale-out sized a loop ahead does (:data:`CLIMB_OVER`): ``cheap``, ``always`` or ``off``. A round keeps its scale-out
until the next one; on a climb that passes its capacity within the loop the job falls behind before the agent
reads it (nile_flow in place: a scale-out a round later met a climb of 5,000/s a loop 99 s behind;
docs/research/experiments.md, experiment 49). ``always`` took an accelerating climb's restart a round sooner
(lynx_trappings) but traded misses elsewhere at a restart's cost: dev +0.12 %, no miss fewer (experiment 59)."""

HOLD_LANDS = "loop"
"""Where a rescale is cheap, how long the undo of a decision takes to land in its hold: ``loop``, or ``downtime``
(the measured downtime of a rescale from the current scale-out), which saved 2 % of the dev half's worker-hours
and doubled its misses (experiment 17)."""

CHEAP_RESCALE_TARGET = 0.02
"""A rescale is cheap when its expected downtime is at most this part of the target recovery time (6 s of the
default 300 s): then its stop is worked off with a fifth of the capacity to spare within a tenth of the target, so
the few rescales of an undo or of a climb in steps still recover in time, and its waits are priced
(``holds: cost``) and its rise envelope conditioned on where the workload stands, at the lower quantile
``forecast_quantile_cheap`` (``agent.analyze.forecasting``). Flink's in-place rescaling stops
a job for 0.1-0.3 s, a restart with new pods for 10-30 s (3-10 % of the default target, half of it or more to work
off with that spare); between them the threshold is far from both. The recovery target, not the loop, is what a
stop is judged by: the loop says how soon an undo lands, not what it costs, and judged by a tenth of a loop
compressed to 1.5 s (a replay at 20×) an in-place stop of half a second counted as a restart. A dear rescale keeps the
settings' waits (:data:`HOLDS_PRICED_DEAR`) and the unconditioned envelope: at a restart's cost, the
priced waits and the conditioned envelope cut 1.6 % of the held-out half's worker-hours and added 5 misses to its 9
(docs/research/experiments.md, experiments 15, 23 and 54)."""

READY_THROUGH_HOLD = "scale-in"
"""Which decisions must stay ready for a failure through their hold: ``scale-in``, ``every`` (the current
scale-out too, through the next two loops, and a scale-out through its hold) or ``off``. Ready: the upper
bound's peak over the hold at most the highest steady workload at which a failure at that scale-out still
recovers within the target (:attr:`PlanInput.failure_ready`). The recovery checks see the workload of now;
a scale-in taken at the foot of a rise, carrying the rise's peak with a few percent to spare, runs into it
unable to recover from a failure, and at a restart's cost no rescale may then recover in time either. Where a
rescale is cheap the next round restores the readiness for a second's stop, and the check cost 0.6-1.2 % of the
dev half's worker-hours with no miss fewer: it applies where a rescale is dear (docs/research/experiments.md,
experiment 19)."""

READY_WHERE = "dear"
"""Where :data:`READY_THROUGH_HOLD` applies: ``dear``, where a rescale is dear only, or ``always``, where it is cheap
too (each scale-in's hold then that of :data:`HOLD_FROM`). Where cheap, even over a scale-in's shorter hold, the
check cost 0.7-0.8 % of every half's worker-hours for 8 -> 6 avoidable misses: a failure's spare capacity held
through the hold does not ready a job for the second and third failure that cost the misses left
(docs/research/experiments.md, experiment 21). Against the readiness of a failure striking as the scale-in's own
stop ends (:data:`agent.analyze.candidates.SCALE_IN_READY_AFTER_RESCALE`) it took the dev half's two avoidable
misses in place for one new one and 1.6 % more worker-hours, and held-out it cost 1.1 % with the same miss
(experiment 47)."""

HOLD_FROM = "scale-in"
"""Where a rescale is cheap, which recovery a decision's hold (:func:`decision_hold_s`) starts with: ``planned``,
the slower of the rescale's and a failure's once there (:attr:`PlanInput.recovery_times`); ``scale-in``, a
scale-in's from the rescale's own (:attr:`PlanInput.rescale_recoveries`), a scale-out's from the slower; or
``rescale``, every decision's from the rescale's own. The agent may undo a scale-in once its rescale has caught
up; a failure at the smaller scale-out is checked on its own (its recovery within the target; the upper bound
carried through it where :data:`RECOVERING_OVER` says so). A scale-out keeps the longer hold: sized short on a
rise it is the start of a staircase. Every decision's shorter hold cut 1.2 % of both halves' worker-hours and
added misses where bursts outran a scale-out (held-out 1 -> 5); a scale-in's alone, with :data:`CLIMB_CARRIED`, is
kept (experiment 20)."""

RECOVERING_OVER = "own"
"""Where a rescale is cheap, how long a scale-out must carry the upper bound while recovering (check 3): ``own``,
a rescale to it while the rescale itself catches up and the current scale-out until the next round; or
``planned``, the slower of a rescale's and a failure's recovery, as where a rescale is dear. While a stop catches
up the agent holds its decisions, so what the stop that will happen cannot outrun must carry it. A failure is a
stop that may happen: its recovery is checked against the target on the point forecast, and if the workload then
outruns the capacity the recovery guard yields (:func:`cannot_catch_up`) and the next round adds workers for a
second's stop. Held to the upper bound over a failure's recovery too, a scale-in at the edge of a partition
step waited for the rise envelope over minutes: on the dev half in place that check refused 12 % of the
worker-hours above the failure-robust floor; over the rescale's own recovery the median trace went from 1.075x to
1.062x the floor, the worker-hours down 1.0 %, the rescales 9 %, with the same two misses
(docs/research/experiments.md, experiment 44)."""

FALLBACK_FROM = "more capacity"
"""What the fallback chooses from when no scale-out meets every check: ``more capacity`` (the current scale-out and
those of more capacity than it) or ``any`` (every scale-out of known capacity). A fallback to fewer workers in the
middle of a recovery at the capacity's edge replayed an interval and missed (docs/research/experiments.md,
experiment 38)."""

SETTLED_OVER_HORIZON = "dear"
"""Where a rescale is dear, whether a scale-in that carries the upper bound's peak over the whole forecast horizon
(and what :data:`SETTLED_CARRIES` adds), recovers within the target and stays ready for a failure at that peak is
taken once wanted over the last loop, not after the stabilization window: ``dear`` or ``off``. The window is there
to tell a lasting fall from a trough; a scale-in that carries the bound and the workload of most of the last hour
has no trough to wait out. On the bound alone it took the troughs the bound does not foresee: on the dev half at a
restart's cost 4.4 % fewer worker-hours and 6 -> 25 avoidable misses (docs/research/experiments.md, experiment
50)."""

SETTLED_CARRIES = "usual"
"""What a scale-in settled over the horizon (:data:`SETTLED_OVER_HORIZON`) must carry besides the upper bound's peak:
``usual``, the workload the job stood at or under for the rise quantile of the last hour it keeps
(:attr:`PlanInput.workload_usual`; nothing is settled while it is unknown), or ``bound``, nothing more. A trough lies
below where the workload usually stands, so the usual level refuses the scale-ins in dips the bound does not
foresee; after a burst the usual level is the one before it. At a restart's cost, against the window alone: dev
-2.6 % worker-hours, 1.244x -> 1.213x the failure-robust floor at the median, worst 2.944x -> 2.583x, avoidable
misses 6 -> 7; held-out -2.6 %, 1.368x -> 1.310x, worst 2.921x -> 2.698x, 17 -> 18 (docs/research/experiments.md,
experiment 52). Where a rescale is cheap the window is a loop and nothing is settled."""

STABILIZED_TO = "wish"
"""What a scale-in wanted in every round over its stabilization window is taken to: ``wish``, this round's wish, or
``highest``, the highest scale-out wanted over the window (the HPA's rule). The window is there to confirm that a
scale-in is wanted, not to size it: each round's wish passed the scale-in's checks on that round's readings, and
the newest is sized on the newest. A round counts when it wanted fewer workers than the job ran then (read from the
policy's state, :func:`_scale_in_since`), so a descent that goes on after a scale-in is followed a round later, not
a round behind each wish. Where a rescale is cheap the window is a loop, and on a burst's way down the highest
wanted stepped 14 -> 9 -> 5 -> 3 -> 2 a round behind the wishes; by the wish the dev half's worst trace in place went
from 1.314x to 1.284x the failure-robust floor and the held-out half's from 1.403x to 1.351x, 0.4 % fewer
worker-hours on each, the same misses (docs/research/experiments.md, experiment 51)."""

STABILIZED_TO_WHERE = "cheap"
"""Where :data:`STABILIZED_TO` applies: ``cheap``, where a rescale is cheap, or ``always``. At a restart's cost the
window is five minutes, and the wish at its end is the bottom of a valley as often as a level: the dev half cost
2.1 % less and its avoidable misses went from 6 to 9 (nyc_flights_daily went from 14 workers to 5 at the bottom of
a valley and climbed back behind the next rise in three restarts; docs/research/experiments.md, experiment 51)."""

HOLDS_PRICED_DEAR: frozenset[str] = frozenset()
"""Which holds follow from what the job's rescales cost where a rescale is dear too (with ``holds: cost``; where it
is cheap every one does): ``grace`` (the rescale's downtime and half a loop), ``recent`` (the recent-rescale window,
until a one-worker scale-in would have paid for its rescale), ``stabilization`` (until one worker's saving pays for
the scale-in's rescale); the others are the settings. A price measures what a round trip costs, not how likely one
is: at a restart's cost the window priced saved 0.26 % of the dev half's worker-hours and 0.37 % of the held-out
half's with no miss more, but on the demo's bank_calls it let a scale-out made on a climb be undone two minutes
later, at the foot of the rest of the climb, which three restarts then met late (one miss where none was). The grace
priced added two avoidable misses to the dev half's 7 for 0.9 % fewer worker-hours, the stabilization three for
0.6 %, all three four for 1.5 % (docs/research/experiments.md, experiment 54)."""

MIN_HOLD_LOOPS = 1.0
"""The shortest recent-rescale window and scale-in stabilization (with ``holds: cost``), in loops: a scale-in
wanted in one round only is noise until the next round confirms it (the readings of one loop)."""


def cheap_rescale(downtime_s: float | None, target_recovery_time_s: float) -> bool:
    """Whether a rescale of this expected downtime is cheap against the recovery target
    (:data:`CHEAP_RESCALE_TARGET`); unknown is not."""
    return (
        downtime_s is not None
        and math.isfinite(downtime_s)
        and downtime_s <= CHEAP_RESCALE_TARGET * target_recovery_time_s
    )


def _priced(plan_input: PlanInput, config: PlannerConfig) -> bool:
    """``holds: cost`` and the rescale from the current scale-out cheap: the round's waits are priced."""
    return config.holds == "cost" and cheap_rescale(
        plan_input.rescale_downtimes.get(plan_input.current_parallelism), config.target_recovery_time_s
    )


def _holds_priced(plan_input: PlanInput, config: PlannerConfig, hold: str) -> bool:
    """Whether this round's ``hold`` (``grace``, ``recent`` or ``stabilization``) follows from the rescale's cost
    (:data:`HOLDS_PRICED_DEAR`)."""
    return _priced(plan_input, config) or (hold in HOLDS_PRICED_DEAR and config.holds == "cost")


def _where(setting: str, plan_input: PlanInput, config: PlannerConfig) -> bool:
    """Whether a rule whose reach is ``setting`` applies this round: ``always``, ``cheap`` where the round's waits are
    priced (:func:`_priced`), ``dear`` where they are not, anything else (``off``) never."""
    if setting in ("cheap", "dear"):
        return _priced(plan_input, config) == (setting == "cheap")
    return setting == "always"


def rescale_cost_ws(plan_input: PlanInput, n: int) -> float | None:
    """What a rescale from the current scale-out to ``n`` wastes, in worker-seconds: every worker of the larger
    scale-out held through its measured downtime, and the records since the last checkpoint processed a second
    time at ``n`` workers' capacity (none when the rescale is aligned with a checkpoint). None when the downtime
    or the capacity is unknown. The catch-up after the downtime is no waste (those records are processed once);
    its time is what the search's recovery checks hold against the target."""
    downtime = plan_input.rescale_downtimes.get(n)
    capacity = plan_input.capacities.get(n)
    if downtime is None or capacity is None or capacity <= 0 or not math.isfinite(downtime):
        return None
    replay = max(plan_input.replay_records or 0.0, 0.0)
    return max(plan_input.current_parallelism, n) * max(downtime, 0.0) + n * replay / capacity


def break_even_s(plan_input: PlanInput, n: int) -> float | None:
    """How long a scale-in to ``n`` must last to pay for its rescale with the workers it saves (None: unknown)."""
    saved = plan_input.current_parallelism - n
    cost = rescale_cost_ws(plan_input, n)
    return None if cost is None or saved <= 0 else cost / saved


@dataclass(frozen=True)
class Holds:
    """The round's time constants: the configured ones, or (``holds: cost``) what this job's rescales cost."""

    grace_s: float
    recent_rescale_window_s: float
    priced: bool
    """True when the rescale cost was known and at least one of the two follows from it."""


def holds(plan_input: PlanInput, config: PlannerConfig) -> Holds:
    """The grace period and the recent-rescale window of this round.

    With ``holds: cost`` and a cheap rescale (:func:`cheap_rescale`), each is what it protects against, priced:
    the grace lasts the rescale's downtime and :data:`SETTLE_LOOPS` of a loop (the readings of the new
    scale-out); the recent-rescale window lasts until a one-worker scale-in would have paid for its own
    rescale (:func:`break_even_s`: a round trip right after a rescale costs more than it saves before then), at
    least a loop. The settings are the ceilings. A dear rescale keeps the settings (but for the holds
    :data:`HOLDS_PRICED_DEAR` names)."""
    current = plan_input.current_parallelism
    downtime = plan_input.rescale_downtimes.get(current)
    grace_priced, recent_priced = (_holds_priced(plan_input, config, hold) for hold in ("grace", "recent"))
    if not (grace_priced or recent_priced) or downtime is None:
        return Holds(config.grace_period_s, config.recent_rescale_window_s, False)
    grace = config.grace_period_s
    if grace_priced:
        grace = min(grace, max(downtime, 0.0) + SETTLE_LOOPS * config.loop_interval_s)
    one_in = break_even_s(plan_input, current - 1) if current > config.min_parallelism else None
    recent = (
        config.recent_rescale_window_s
        if one_in is None or not recent_priced
        else min(config.recent_rescale_window_s, max(one_in, MIN_HOLD_LOOPS * config.loop_interval_s))
    )
    return Holds(grace, recent, True)


def stabilization_s(plan_input: PlanInput, config: PlannerConfig, desired: int) -> float:
    """How long a scale-in to ``desired`` must have been wanted before it is taken. With ``holds: cost``, the
    time one worker takes to pay for its rescale (:func:`rescale_cost_ws`), at least :data:`MIN_HOLD_LOOPS` and
    at most ``scale_down_stabilization_s``. Waiting as long as a saving takes to pay for its rescale before
    paying for it costs at most twice what knowing the future would (the ski-rental rule) and keeps a workload
    that hovers at a threshold from flapping: a flap costs two rescales, which the wait has earned. The saving
    counted is one worker's, however many the scale-in gives up: the workers of a larger scale-in are given up
    on one forecast and come back in one undo if it is wrong, and priced on all of them a restart's scale-in of
    half the workers waited a minute and missed (docs/research/experiments.md, experiment 15). Fixed holds:
    the setting."""
    if not _holds_priced(plan_input, config, "stabilization") or desired >= plan_input.current_parallelism:
        return config.scale_down_stabilization_s
    cost = rescale_cost_ws(plan_input, desired)
    if cost is None:
        return config.scale_down_stabilization_s
    return min(config.scale_down_stabilization_s, max(cost, MIN_HOLD_LOOPS * config.loop_interval_s))


def _fmt(rate: float) -> str:
    return f"{rate:,.0f}/s"


def forecast_max(forecast: np.ndarray, seconds: float) -> float:
    """Peak of the forecast over its first ``seconds`` (at least one step; all of it for an unbounded time)."""
    if not math.isfinite(seconds):
        return float(np.max(forecast))
    steps = max(1, min(len(forecast), int(math.ceil(seconds))))
    return float(np.max(forecast[:steps]))


@dataclass(frozen=True, eq=False)
class _Known:
    """What the search needs, known this round: the average workload, the forecast and today's capacity."""

    workload: float
    forecast: np.ndarray
    """The expected workload (the point forecast): what a long-lived scale-out is sized for."""
    upper: np.ndarray
    """The workload as high as it may rise: what must hold through a recovery, or until a scale-in can be undone."""
    capacity_now: float


def _guards(plan_input: PlanInput, config: PlannerConfig) -> Decision | None:
    """Grace period, recovery hold, operator bounds (in that order); ``config`` carries this round's holds."""
    return guards.first_holding(
        guards.grace_period(plan_input, config),
        None if cannot_catch_up(plan_input, config) else guards.recovering(plan_input, config),
        guards.operator_bounds(plan_input, config),
    )


def cannot_catch_up(plan_input: PlanInput, config: PlannerConfig) -> bool:
    """A recovering job that its scale-out can no longer bring back in time: the workload rose to its capacity (or the
    forecast says it will within a loop), or the backlog takes longer to work off with the capacity to spare (or as
    fast as it falls: :data:`RECOVERY_DRAIN_MEASURED`) than the recovery has left (:data:`RECOVERY_LEFT_FROM`); on a
    climb (:data:`RECOVERY_UNDER_CLIMB`), with the spare shrinking as the climb goes on (:func:`drain_s`), or the
    climb passing the capacity before the next round. Waiting for such a recovery only grows the backlog; the search
    decides instead."""
    capacity = plan_input.capacities.get(plan_input.current_parallelism)
    workload = plan_input.workload_avg
    if capacity is None or workload is None:
        return False
    upper = plan_input.forecast_upper if plan_input.forecast_upper is not None else plan_input.forecast
    arriving = max(workload, forecast_max(upper, config.loop_interval_s) if upper is not None and len(upper) else 0.0)
    spare = capacity - arriving
    backlog = plan_input.consumer_lag or 0.0
    if spare <= 0:
        return True
    drain = plan_input.backlog_drain
    behind = backlog > max(workload, 1.0)  # more than a second of input: a caught-up job's lag is noise
    if behind and drain is not None and math.isfinite(drain) and _where(RECOVERY_DRAIN_MEASURED, plan_input, config):
        if drain <= 0:
            return True
        spare = min(spare, drain)
    growth = _recovery_climb(plan_input, config)
    if growth > 0 and workload + growth * config.loop_interval_s >= capacity:
        return True
    return drain_s(backlog, spare, growth) > _recovery_left_s(plan_input, config)


def _recovery_left_s(plan_input: PlanInput, config: PlannerConfig) -> float:
    """Seconds a recovering job has left to work its backlog off in (:data:`RECOVERY_LEFT_FROM`)."""
    since = plan_input.recovering_since
    if RECOVERY_LEFT_FROM != "stop" or since is None:
        return config.target_recovery_time_s
    return config.target_recovery_time_s - max(0.0, plan_input.now - since)


def _recovery_climb(plan_input: PlanInput, config: PlannerConfig) -> float:
    """How fast the arrivals a recovery must outrun grow, in records per second each second: the climb's rate
    (:func:`_climb_rate`) where the workload climbs and :data:`RECOVERY_UNDER_CLIMB` applies, else 0."""
    workload = plan_input.workload_avg
    if not _where(RECOVERY_UNDER_CLIMB, plan_input, config) or workload is None:
        return 0.0
    return _climb_rate(workload, _read_climb(plan_input, config, workload, scale_in=False), config)


def drain_s(backlog: float, spare: float, growth: float) -> float:
    """Seconds until ``backlog`` records are worked off at ``spare`` records per second to spare, the spare shrinking
    by ``growth`` each second (the arrivals climbing): the first ``t`` with ``spare t - growth t^2 / 2 >= backlog``;
    endless when the climb uses the spare up first."""
    if backlog <= 0:
        return 0.0
    if growth <= 0:
        return backlog / spare if spare > 0 else math.inf
    discriminant = spare * spare - 2.0 * growth * backlog
    if spare <= 0 or discriminant < 0:
        return math.inf
    return (spare - math.sqrt(discriminant)) / growth


def _known(plan_input: PlanInput) -> _Known | Decision:
    """The signals the search needs, or the decision to keep the scale-out because one is unknown."""
    current = plan_input.current_parallelism
    workload = plan_input.workload_avg
    forecast = plan_input.forecast
    capacity_now = plan_input.capacities.get(current)
    if workload is None:
        return guards.unknown(plan_input, "workload unknown this round: keeping the current scale-out")
    if forecast is None or len(forecast) == 0:
        return guards.unknown(plan_input, "no workload forecast yet: keeping the current scale-out")
    if capacity_now is None:
        return guards.unknown(plan_input, f"capacity at the current scale-out {current} unknown: keeping it")
    if not plan_input.recovery_times:
        # No candidate's recovery could be predicted (no recent workload to predict from): every one would read
        # "never", and the fallback would take the largest scale-out on a gap in the readings.
        return guards.unknown(plan_input, "no recovery predicted this round: keeping the current scale-out")
    upper = plan_input.forecast_upper if plan_input.forecast_upper is not None else forecast
    return _Known(workload, forecast, upper, capacity_now)


def _recent_rescale_hold(plan_input: PlanInput, config: PlannerConfig, known: _Known) -> Decision | None:
    """Algorithm 1's first check: a job rescaled recently keeps its scale-out while it still carries the load: the
    average workload and the upper bound's peak until the next loop, and a climb continued to it where a kept
    scale-out must carry that (:data:`CURRENT_CARRIES_CLIMB`)."""
    if (
        plan_input.last_rescale_at is None
        or plan_input.now - plan_input.last_rescale_at >= config.recent_rescale_window_s
    ):
        return None
    next_loop_peak = max(forecast_max(known.upper, config.loop_interval_s), _kept_climb(plan_input, config, known))
    if known.capacity_now > known.workload and known.capacity_now > next_loop_peak:
        return keep(
            plan_input.current_parallelism,
            ReasonCode.KEEP,
            f"rescaled recently and {plan_input.current_parallelism} still carries the average {_fmt(known.workload)} "
            f"and the next loop's peak {_fmt(next_loop_peak)} (capacity {_fmt(known.capacity_now)})",
            acted=True,
        )
    return None


def _wanted_while_held(plan_input: PlanInput, config: PlannerConfig, known: _Known, hold: Decision) -> Decision:
    """The recent-rescale hold's decision, wanting the scale-in the candidate search would take (:data:`RECENT_WANTS`,
    :data:`RECENT_WANTS_WHERE`): the job keeps its scale-out this round, and the stabilization counts the wish."""
    if RECENT_WANTS != "searched" or not _where(RECENT_WANTS_WHERE, plan_input, config):
        return hold
    reasons: list[str] = []
    wanted = _search(plan_input, config, known, reasons)
    current = plan_input.current_parallelism
    if wanted is None or wanted >= current:
        return hold
    return Decision.whole_job(current, wanted, (*hold.reasons, f"wanted {reasons[-1]}"), hold.code)


def _search(plan_input: PlanInput, config: PlannerConfig, known: _Known, reasons: list[str]) -> int | None:
    """The smallest scale-out that meets every check of Algorithm 1 (see the module docstring), or None; one
    reason per scale-out tried."""
    next_loop = float(np.mean(known.forecast[: max(1, int(config.loop_interval_s))]))
    behind = _behind(known.workload, next_loop, plan_input.workload_previous)
    climb_in = _read_climb(plan_input, config, known.workload, scale_in=True)
    climb_out = _read_climb(plan_input, config, known.workload, scale_in=False)
    climbing = _climbing(known.workload, climb_in)
    rising_out = behind or _climbing(known.workload, climb_out)
    rising = behind or climbing
    if climb_in is None and climb_out is None:
        within = _within_noise(known.workload, plan_input.workload_previous, _noise_for(plan_input, scale_in=False))
        if within:
            reasons.append(within)
    carried = bool(climbing) and _climb_carried_by_scale_ins(plan_input, config)
    lift = _lifted(plan_input, config, known, next_loop, climbing) if behind else None
    lifted = None
    if lift is not None:
        lifted, gap = lift
        reasons.append(f"{rising}: scale-ins checked against the forecast raised by the gap ({gap})")
    elif carried and not behind:
        lifted = known
    if carried and lifted is not None:
        reasons.append(f"{climbing}: scale-ins carry the climb {_climb_word()} over their hold")
    for n in range(config.min_parallelism, config.max_parallelism + 1):
        if lifted is not None and n < plan_input.current_parallelism:
            qualifies, reason = _candidate(plan_input, config, lifted, n, "")
        else:
            qualifies, reason = _candidate(
                plan_input, config, known, n, rising_out if n > plan_input.current_parallelism else rising
            )
        reasons.append(f"{n}: {reason}")
        if qualifies:
            return n
    return None


def _lifted(
    plan_input: PlanInput, config: PlannerConfig, known: _Known, next_loop: float, climbing: str
) -> tuple[_Known, str] | None:
    """The round's signals with the forecast and its upper bound raised by the gap between the last loop's average
    and the forecast for the next loop (:data:`RISE_GAP`, :data:`RISE_GAP_BY`), with the gap as the reason gives it,
    for the scale-ins of a round whose workload counts as rising only by that gap (:data:`RISE_GAP_WHERE`); None
    where the rise refuses every scale-in, ``climbing`` (the scale-ins' climb, :func:`_climbing`) among them where a
    climb refuses them."""
    if (
        RISE_GAP != "lift"
        or not _where(RISE_GAP_WHERE, plan_input, config)
        or (RISE_GAP_BY == "ratio" and next_loop <= 0)
        or (climbing and not _climb_carried_by_scale_ins(plan_input, config))
    ):
        return None
    if RISE_GAP_BY == "level":
        gap = known.workload - next_loop
        return replace(known, forecast=known.forecast + gap, upper=known.upper + gap), f"+{_fmt(gap)}"
    ratio = known.workload / next_loop
    return replace(known, forecast=known.forecast * ratio, upper=known.upper * ratio), f"x{ratio:.3f}"


def _candidate(plan_input: PlanInput, config: PlannerConfig, known: _Known, n: int, rising: str) -> tuple[bool, str]:
    """Whether scale-out ``n`` meets every check of Algorithm 1, and the check that decided: it carries the
    average workload, recovers within the target and carries the workload through its recovery; then the
    checks of a scale-in or of a scale-out."""
    capacity = plan_input.capacities.get(n)
    if capacity is None:
        return False, "capacity unknown"
    if capacity <= known.workload:
        return False, f"capacity {_fmt(capacity)} <= average workload {_fmt(known.workload)}"
    recovery = plan_input.recovery_times.get(n, math.inf)
    if recovery > config.target_recovery_time_s:
        shown = "never" if math.isinf(recovery) else f"{recovery:.0f} s"
        return False, f"recovery {shown} > target {config.target_recovery_time_s:.0f} s"
    recovering_s = _recovering_s(plan_input, config, n, recovery)
    during_recovery = forecast_max(known.upper, recovering_s)
    if capacity < during_recovery:
        return False, (
            f"capacity {_fmt(capacity)} < forecast {_fmt(during_recovery)} while recovering"
            + ("" if recovering_s == recovery else f" ({recovering_s:.0f} s)")
        )
    if n == plan_input.current_parallelism:
        climbed = _kept_climb(plan_input, config, known)
        if capacity <= climbed:
            return False, f"capacity {_fmt(capacity)} < the climb continued a loop ahead to {_fmt(climbed)}"
        if READY_THROUGH_HOLD == "every":
            keep_s = 2 * config.loop_interval_s
            unready = _unready(plan_input, config, n, forecast_max(known.upper, keep_s), keep_s)
            if unready:
                return False, unready
        return True, f"current scale-out qualifies (recovery {recovery:.0f} s)"
    if n < plan_input.current_parallelism:
        return _scale_in_qualifies(plan_input, config, known, n, capacity, recovery, rising)
    return _scale_out_qualifies(plan_input, config, known, n, capacity, recovery, rising)


def _kept_climb(plan_input: PlanInput, config: PlannerConfig, known: _Known) -> float:
    """The climb continued to the next round that the current scale-out must carry to be kept, by the search or by
    the recent-rescale window (:data:`CURRENT_CARRIES_CLIMB`); 0 where it need not."""
    if not _where(CURRENT_CARRIES_CLIMB, plan_input, config):
        return 0.0
    return _climb_over(plan_input, config, known, config.loop_interval_s)


def _recovering_s(plan_input: PlanInput, config: PlannerConfig, n: int, recovery: float) -> float:
    """How long scale-out ``n`` must carry the upper bound while recovering (:data:`RECOVERING_OVER`): where a
    rescale is cheap, a rescale to it its own recovery (the planned ``recovery`` where unknown) and the current one
    until the next round; else ``recovery``, the slower of a rescale's and a failure's."""
    if RECOVERING_OVER != "own" or not _priced(plan_input, config):
        return recovery
    if n == plan_input.current_parallelism:
        return config.loop_interval_s
    return plan_input.rescale_recoveries.get(n, recovery)


def _hold_peak(
    plan_input: PlanInput, config: PlannerConfig, known: _Known, n: int, recovery: float
) -> tuple[float, float]:
    """``(hold, peak)``: the hold of a rescale to ``n`` this round (:func:`_hold_s`) and the upper bound's peak
    over it."""
    hold_s = _hold_s(plan_input, config, _hold_recovery(plan_input, config, n, recovery))
    return hold_s, forecast_max(known.upper, hold_s)


def _hold_recovery(plan_input: PlanInput, config: PlannerConfig, n: int, recovery: float) -> float:
    """The recovery the hold of a rescale to ``n`` starts with (:data:`HOLD_FROM`): the rescale's own where a rescale
    is cheap and the switch covers ``n`` and it is known, else ``recovery`` (the planned one)."""
    covered = HOLD_FROM == "rescale" or (HOLD_FROM == "scale-in" and n < plan_input.current_parallelism)
    if not covered or not _priced(plan_input, config):
        return recovery
    return plan_input.rescale_recoveries.get(n, recovery)


def _scale_in_qualifies(
    plan_input: PlanInput,
    config: PlannerConfig,
    known: _Known,
    n: int,
    capacity: float,
    recovery: float,
    rising: str,
) -> tuple[bool, str]:
    """A scale-in to ``n``: not on a workload rising where no lift applies (:func:`_search`) nor while catching up,
    carrying the forecast peak of its hold and a climb compounded over it (:func:`_scale_in_climb`), and paying for
    itself (:func:`_unpaid`)."""
    if rising:
        return False, f"{rising}: no scale-in on a rising workload"
    lag = plan_input.consumer_lag
    if lag is not None and capacity < lag:
        return False, f"consumer lag {lag:,.0f} > capacity {_fmt(capacity)}: still catching up"
    hold_s, hold_peak = _hold_peak(plan_input, config, known, n, recovery)
    climbed = _scale_in_climb(plan_input, config, known, hold_s)
    what = f"the forecast peak {_fmt(hold_peak)}"
    if climbed > hold_peak:
        hold_peak, what = climbed, f"the climb {_climb_word()} to {_fmt(climbed)}"
    if capacity <= hold_peak:
        return False, f"capacity {_fmt(capacity)} < {what} of its {hold_s:.0f} s hold"
    unready = _unready(plan_input, config, n, hold_peak, hold_s)
    if unready:
        return False, unready
    unpaid = _unpaid(plan_input, config, known, n, capacity)
    if unpaid:
        return False, unpaid
    return (
        True,
        f"carries {what} of its {hold_s:.0f} s hold (capacity {_fmt(capacity)}) and recovers in {recovery:.0f} s",
    )


def _scale_out_qualifies(
    plan_input: PlanInput,
    config: PlannerConfig,
    known: _Known,
    n: int,
    capacity: float,
    recovery: float,
    rising: str,
) -> tuple[bool, str]:
    """A scale-out: where a rescale is cheap (:data:`SCALE_OUT_SIZED_ON`), it carries the upper bound's peak over
    its hold; else the forecast peak over the horizon, or, on a rising workload, the rise envelope until the agent
    can act again if that is higher. On a climb, the climb continued where that is higher still
    (:data:`CLIMB_CARRIED`): where cheap until the agent can act on it (:data:`CLIMB_OVER`), else over the hold."""
    priced = _priced(plan_input, config)
    if SCALE_OUT_SIZED_ON == "hold" and priced:
        hold_s, hold_peak = _hold_peak(plan_input, config, known, n, recovery)
        what = f"the peak {_fmt(hold_peak)} of its {hold_s:.0f} s hold"
        climb_s = _climb_s(plan_input, config, n, recovery, hold_s)
        climbed = _climb_over(plan_input, config, known, climb_s)
        if climbed > hold_peak:
            hold_peak = climbed
            what = (
                f"the climb continued to {_fmt(climbed)} of its {hold_s:.0f} s hold"
                if climb_s == hold_s
                else f"the climb continued {climb_s:.0f} s ahead to {_fmt(climbed)} (it recovers within the loop)"
            )
        if capacity > hold_peak:
            return True, f"carries {what} (capacity {_fmt(capacity)}) and recovers in {recovery:.0f} s"
        return False, f"capacity {_fmt(capacity)} < {what}"
    if READY_THROUGH_HOLD == "every":
        hold_s, hold_peak = _hold_peak(plan_input, config, known, n, recovery)
        unready = _unready(plan_input, config, n, hold_peak, hold_s)
        if unready:
            return False, unready
    peak, what = float(np.max(known.forecast)), "the forecast peak"
    ahead_s = decision_hold_s(recovery, config)  # until the agent can act again and its decision has landed
    if rising:
        # A rise under way: the scale-out must carry what the rise envelope says until the agent can act
        # again, or the next rounds climb a staircase of rescales behind the workload.
        rise = forecast_max(known.upper, ahead_s)
        if rise > peak:
            peak, what = rise, f"the rise {ahead_s:.0f} s ahead ({rising})"
    if not priced and CLIMB_CARRIED_WHERE == "always":  # where cheap, the hold's branch above carried it
        climbed = _climb_over(plan_input, config, known, ahead_s)
        if climbed > peak:
            peak, what = climbed, f"the climb continued {ahead_s:.0f} s ahead to"
    if capacity > peak:
        return True, f"carries {what} {_fmt(peak)} (capacity {_fmt(capacity)}) and recovers in {recovery:.0f} s"
    return False, f"capacity {_fmt(capacity)} < {what} {_fmt(peak)}"


def _climb_carried_by_scale_ins(plan_input: PlanInput, config: PlannerConfig) -> bool:
    """Whether a climb is carried by the scale-ins this round rather than refusing them (:data:`CLIMB_ON_SCALE_IN`,
    :data:`CLIMB_ON_SCALE_IN_WHERE`)."""
    return CLIMB_ON_SCALE_IN in ("carry", "compound") and _where(CLIMB_ON_SCALE_IN_WHERE, plan_input, config)


def _scale_in_climb(plan_input: PlanInput, config: PlannerConfig, known: _Known, hold_s: float) -> float:
    """The climb a scale-in must carry over its hold (:data:`CLIMB_ON_SCALE_IN`): continued at its rate (``carry``,
    :func:`_climb_over`) or at its ratio a loop compounded a loop at a time (``compound``), over the loop before or
    the loops of a climb over several (:func:`_climb`); 0 where the workload does not climb or a climb refuses the
    scale-ins."""
    if not _climb_carried_by_scale_ins(plan_input, config):
        return 0.0
    climb = _read_climb(plan_input, config, known.workload, scale_in=True)
    if climb is None or climb[0] <= 0:
        return 0.0
    if CLIMB_ON_SCALE_IN == "compound":  # in logarithms: a climb from next to nothing compounds past any float
        base, over = climb
        loops = hold_s / config.loop_interval_s
        return known.workload * math.exp(min(math.log(known.workload / base) / over * loops, 700.0))
    return _climb_over(plan_input, config, known, hold_s, scale_in=True)


def _climb_word() -> str:
    """How the reasons name the climb a scale-in carries (:data:`CLIMB_ON_SCALE_IN`)."""
    return "compounded" if CLIMB_ON_SCALE_IN == "compound" else "continued"


def _climb_s(plan_input: PlanInput, config: PlannerConfig, n: int, recovery: float, hold_s: float) -> float:
    """How far ahead a cheap scale-out to ``n`` carries a climb (:data:`CLIMB_OVER`): a loop when the rescale's own
    recovery (else the planned one) ends within it, else its hold ``hold_s``."""
    own = plan_input.rescale_recoveries.get(n, recovery)
    if CLIMB_OVER == "loop" or (CLIMB_OVER == "next round" and own <= config.loop_interval_s):
        return config.loop_interval_s
    return hold_s


def _climb_over(
    plan_input: PlanInput, config: PlannerConfig, known: _Known, hold_s: float, *, scale_in: bool = False
) -> float:
    """The climb continued over ``hold_s`` (the last loop's average plus the climb per second, :func:`_climb_rate`,
    times the hold) where the workload climbs as a scale-in's or another decision reads it (:func:`_read_climb`) and
    :data:`CLIMB_CARRIED` is on; else 0."""
    rate = _climb_rate(known.workload, _read_climb(plan_input, config, known.workload, scale_in=scale_in), config)
    if not CLIMB_CARRIED or rate <= 0:
        return 0.0
    return known.workload + rate * hold_s


def _climb_rate(workload: float, climb: tuple[float, int] | None, config: PlannerConfig) -> float:
    """The climb per second of the last loop's average ``workload`` where it climbs (``climb``, :func:`_climb`'s base
    and loops): over the loop before, or over the loops of a sustained climb; else 0."""
    if climb is None:
        return 0.0
    base, loops = climb
    return (workload - base) / (loops * config.loop_interval_s)


def _unready(plan_input: PlanInput, config: PlannerConfig, n: int, peak: float, hold_s: float) -> str:
    """Why scale-out ``n`` would not stay ready for a failure through a hold of ``hold_s`` whose upper bound
    peaks at ``peak`` (empty if it would, where a rescale is cheap, or when its failure-ready workload is
    unknown)."""
    ready = plan_input.failure_ready.get(n)
    if READY_THROUGH_HOLD == "off" or not _where(READY_WHERE, plan_input, config) or ready is None or peak <= ready:
        return ""
    return (
        f"a failure at the peak {_fmt(peak)} of its {hold_s:.0f} s hold would recover after the target "
        f"(in time up to {_fmt(ready)})"
    )


def _unpaid(plan_input: PlanInput, config: PlannerConfig, known: _Known, n: int, capacity: float) -> str:
    """Why a scale-in to ``n`` would not pay for itself (empty if it would, or with fixed holds, or when its cost
    is unknown): the workers it saves over the time it is expected to last — until the point forecast reaches
    its capacity, else the whole horizon — must exceed its rescale's cost, plus the cost of the rescale back
    when the forecast says it will be undone within the horizon (:func:`rescale_cost_ws`)."""
    if not _priced(plan_input, config):
        return ""
    cost_in = rescale_cost_ws(plan_input, n)
    if cost_in is None:
        return ""
    over = np.flatnonzero(known.forecast >= capacity)
    undone = over.size > 0
    lasts_s = float(over[0]) if undone else float(len(known.forecast))
    cost = cost_in + ((rescale_cost_ws(plan_input, plan_input.current_parallelism) or 0.0) if undone else 0.0)
    saved = (plan_input.current_parallelism - n) * lasts_s
    if saved > cost:
        return ""
    until = f"until the forecast reaches its capacity in {lasts_s:.0f} s" if undone else f"over {lasts_s:.0f} s"
    return (
        f"saves {saved:,.0f} worker-s {until}, not more than its rescale{' and the one back' if undone else ''} "
        f"cost ({cost:,.0f} worker-s)"
    )


def _behind(workload: float, next_loop: float, previous: float | None) -> str:
    """Why the forecast is behind the workload (empty if it is not): the last loop's average runs more than
    :data:`RISING_MARGIN` above the forecast for the next loop (while it fell over the loop before, only with
    :data:`RISE_GAP_WHILE_FALLING`)."""
    falling = previous is not None and workload < previous
    if workload > (1.0 + RISING_MARGIN) * next_loop and (RISE_GAP_WHILE_FALLING or not falling):
        return f"the workload {_fmt(workload)} runs above the forecast for the next loop {_fmt(next_loop)}"
    return ""


def climb_margin(noise: float | None) -> float:
    """How far above the loop before's average the last loop's must run to count as a climb: :data:`CLIMB_MARGIN`,
    or :data:`CLIMB_NOISE_Z` spreads of the workload's loop-to-loop noise where that is more."""
    if CLIMB_NOISE_Z is None or noise is None or not math.isfinite(noise):
        return CLIMB_MARGIN
    return max(CLIMB_MARGIN, CLIMB_NOISE_Z * noise)


def _noise_for(plan_input: PlanInput, *, scale_in: bool) -> float | None:
    """The workload's noise a climb is read against by a scale-in's checks (``scale_in``) or by the others'
    (:data:`CLIMB_NOISE_FOR`); None: the climb margin alone."""
    return None if scale_in and CLIMB_NOISE_FOR != "every" else plan_input.workload_noise


def _climb_from_for(plan_input: PlanInput, config: PlannerConfig, *, scale_in: bool) -> float | None:
    """Where a sustained climb a scale-in's checks (``scale_in``) or the others' read started
    (:data:`SUSTAINED_CLIMB_FOR`, :data:`SUSTAINED_CLIMB_WHERE`); None: a climb over the loop before alone."""
    if (
        SUSTAINED_CLIMB_LOOPS is None
        or (scale_in and SUSTAINED_CLIMB_FOR != "every")
        or not _where(SUSTAINED_CLIMB_WHERE, plan_input, config)
    ):
        return None
    return plan_input.workload_climb_from


def _climb(
    workload: float, previous: float | None, noise: float | None = None, climb_from: float | None = None
) -> tuple[float, int] | None:
    """``(base, loops)`` of the workload's climb, or None where it does not climb: the loop before's average and 1
    where the last loop's runs more than the climb margin (:func:`climb_margin`, of the workload's ``noise``) above
    it, whatever the forecast says; else, where it runs past the margin above ``climb_from`` (the foot of a climb over
    :data:`SUSTAINED_CLIMB_LOOPS` loops, each above the one before; the noise grown over them with
    :data:`SUSTAINED_NOISE_GROWS`), that and the loops."""
    margin = climb_margin(noise)
    if previous is not None and workload > (1.0 + margin) * previous:
        return previous, 1
    if not SUSTAINED_CLIMB_LOOPS or climb_from is None or climb_from <= 0:
        return None
    if SUSTAINED_NOISE_GROWS and noise is not None:
        margin = climb_margin(noise * math.sqrt(SUSTAINED_CLIMB_LOOPS))
    if workload > (1.0 + margin) * climb_from:
        return climb_from, SUSTAINED_CLIMB_LOOPS
    return None


def _read_climb(
    plan_input: PlanInput, config: PlannerConfig, workload: float, *, scale_in: bool
) -> tuple[float, int] | None:
    """The climb of the last loop's average ``workload`` (:func:`_climb`) as a scale-in's checks (``scale_in``) or the
    others' read it: against the noise (:func:`_noise_for`) and over the loops (:func:`_climb_from_for`) they read."""
    return _climb(
        workload,
        plan_input.workload_previous,
        _noise_for(plan_input, scale_in=scale_in),
        _climb_from_for(plan_input, config, scale_in=scale_in),
    )


def _climbing(workload: float, climb: tuple[float, int] | None) -> str:
    """Why the last loop's average ``workload`` climbs (empty if it does not: ``climb``, :func:`_climb`'s)."""
    if climb is None:
        return ""
    base, loops = climb
    if loops == 1:
        return f"the workload {_fmt(workload)} climbed from {_fmt(base)} over the loop before"
    return f"the workload {_fmt(workload)} climbed from {_fmt(base)} over the last {loops} loops, each above the last"


def _within_noise(workload: float, previous: float | None, noise: float | None) -> str:
    """Why a rise past :data:`CLIMB_MARGIN` is no climb (empty unless it is one the workload's ``noise`` alone
    explains: within :func:`climb_margin`)."""
    if previous is None or previous <= 0 or workload <= (1.0 + CLIMB_MARGIN) * previous:
        return ""
    margin = climb_margin(noise)
    if workload > (1.0 + margin) * previous:
        return ""
    return (
        f"the workload {_fmt(workload)} rose {100 * (workload / previous - 1.0):.0f} % from {_fmt(previous)} over the"
        f" loop before, within {CLIMB_NOISE_Z:g} spreads of its noise ({100 * margin:.0f} %): not a climb"
    )


def decision_hold_s(recovery_s: float, config: PlannerConfig, landing_s: float | None = None) -> float:
    """How long a rescale's capacity must carry the forecast before the agent could undo it: its recovery,
    then until the agent may act again (the grace period or the next loop, whichever is later), then the time
    that decision takes to land (``landing_s``, a loop unless given). A scale-in carries its peak; a scale-out
    behind a rise, the rise's."""
    landing = config.loop_interval_s if landing_s is None else landing_s
    return recovery_s + max(config.grace_period_s, config.loop_interval_s) + landing


def _hold_s(plan_input: PlanInput, config: PlannerConfig, recovery_s: float) -> float:
    """The hold of a decision this round (:func:`decision_hold_s`)."""
    landing = None
    if HOLD_LANDS == "downtime" and _priced(plan_input, config):
        landing = plan_input.rescale_downtimes.get(plan_input.current_parallelism)
    return decision_hold_s(recovery_s, config, landing)


def _fallback(plan_input: PlanInput, config: PlannerConfig, reasons: list[str]) -> int:
    """No candidate: the scale-out with the shortest predicted recovery; among equals (never, most often)
    the highest capacity, then the fewest workers. Where the capacity stops growing with the scale-out, the
    largest one may carry less than a smaller one, and a rescale to it only adds downtime. Only the current
    scale-out and those of more capacity are chosen from: no scale-out meeting the target means the job lacks
    capacity, and one of less capacity (a few workers fewer near where the capacity stops growing, a failure there
    predicted a little shorter for its shorter restart) stops the job now, for certain, to replay and catch up with
    less to spare than it has."""
    current = plan_input.current_parallelism
    at_least = plan_input.capacities.get(current) if FALLBACK_FROM != "any" else None
    capacities = {
        n: capacity
        for n in range(config.min_parallelism, config.max_parallelism + 1)
        if (capacity := plan_input.capacities.get(n)) is not None
        and (at_least is None or n == current or capacity > at_least)
    }
    known = {n: plan_input.recovery_times.get(n, math.inf) for n in capacities}
    desired = min(known, key=lambda n: (known[n], -capacities[n], n)) if known else config.max_parallelism
    best = known.get(desired, math.inf)
    among = f" of {current} and those of more capacity" if at_least is not None else ""
    reasons.append(
        f"no scale-out in [{config.min_parallelism}, {config.max_parallelism}] meets the target recovery "
        f"time {config.target_recovery_time_s:.0f} s: choosing {desired} with the shortest recovery{among} "
        f"({'never' if math.isinf(best) else f'{best:.0f} s'})"
    )
    return desired


def stabilize(plan_input: PlanInput, config: PlannerConfig, desired: int, reasons: list[str]) -> int:
    """Scale out at once; scale in only to the highest scale-out wanted over the stabilization window
    (:func:`stabilization_s`), or, where :data:`STABILIZED_TO` applies, to this round's wish once every round over
    the window (less half a loop for the rounds' jitter) wanted a scale-in."""
    window_s = stabilization_s(plan_input, config, desired)
    held: list[str] = []
    target = guards.stabilize(
        plan_input,
        desired,
        held,
        window_s=window_s,
        loop_interval_s=config.loop_interval_s,
        upper=config.max_parallelism,
    )
    since = _scale_in_since(plan_input, desired)
    confirmed = since is not None and since <= plan_input.now - window_s + SETTLE_LOOPS * config.loop_interval_s
    applies = STABILIZED_TO == "wish" and _where(STABILIZED_TO_WHERE, plan_input, config)
    if applies and confirmed and desired < target:
        reasons.append(f"scale-in to {desired}: every round over the last {window_s:.0f} s wanted a scale-in")
        return desired
    reasons.extend(held)
    return target


def _scale_in_since(plan_input: PlanInput, desired: int) -> float | None:
    """Since when every round wanted fewer workers than it ran, this one included (:data:`STABILIZED_TO`), read
    from the policy's state; None when this round does not."""
    if desired >= plan_input.current_parallelism:
        return None
    since = (plan_input.policy_state or {}).get("scale_in_since")
    if isinstance(since, (int, float)) and not isinstance(since, bool) and math.isfinite(since):
        return float(since) if since <= plan_input.now else plan_input.now
    return plan_input.now


def _remembered(plan_input: PlanInput, decision: Decision) -> Decision:
    """``decision`` with the state :data:`STABILIZED_TO` reads next round."""
    if STABILIZED_TO != "wish":
        return decision
    since = _scale_in_since(plan_input, decision.desired_parallelism)
    return replace(decision, policy_state={"scale_in_since": since})


def _settled_early(
    plan_input: PlanInput, config: PlannerConfig, known: _Known, desired: int, target: int, reasons: list[str]
) -> int:
    """The stabilized scale-in ``target`` lowered to the smallest scale-out between ``desired`` and it that carries
    the upper bound's peak over the whole forecast horizon (and, with :data:`SETTLED_CARRIES` ``usual``, the usual
    workload), recovers within the target and stays ready for a failure at that peak, once wanted for a loop
    (:data:`SETTLED_OVER_HORIZON`)."""
    if not _where(SETTLED_OVER_HORIZON, plan_input, config) or target <= desired:
        return target
    peak = float(np.max(known.upper))
    what = "the upper bound's peak"
    if SETTLED_CARRIES == "usual":
        usual = plan_input.workload_usual
        if usual is None:
            return target
        if usual > peak:
            peak, what = usual, "the workload of most of the last hour"
    for n in range(desired, target):
        capacity = plan_input.capacities.get(n)
        recovery = plan_input.recovery_times.get(n, math.inf)
        if (
            capacity is None
            or capacity <= peak
            or recovery > config.target_recovery_time_s
            or _unready(plan_input, config, n, peak, float(len(known.upper)))
        ):
            continue
        early = guards.stabilize(
            plan_input,
            n,
            [],
            window_s=MIN_HOLD_LOOPS * config.loop_interval_s,
            loop_interval_s=config.loop_interval_s,
            upper=config.max_parallelism,
        )
        if early < target:
            reasons.append(f"{early} carries {what} {_fmt(peak)} over the horizon: taken at once")
            return early
        return target
    return target


class DaedalusPolicy:
    """Daedalus Algorithm 1 with production guards."""

    name = "daedalus"
    uses_forecast = True
    sync_interval_s: float | None = None

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Holds → guards → recent-rescale hold → candidate search → fallback → stabilization."""
        timed = holds(plan_input, config)
        config = replace(config, grace_period_s=timed.grace_s, recent_rescale_window_s=timed.recent_rescale_window_s)
        held = _guards(plan_input, config)
        if held is not None:
            return held
        known = _known(plan_input)
        if isinstance(known, Decision):
            return known
        hold = _recent_rescale_hold(plan_input, config, known)
        if hold is not None:
            return _remembered(plan_input, _wanted_while_held(plan_input, config, known, hold))
        reasons: list[str] = []
        desired = _search(plan_input, config, known, reasons)
        if desired is None:
            desired = _fallback(plan_input, config, reasons)
            target = stabilize(plan_input, config, desired, reasons)
            return _remembered(plan_input, Decision.whole_job(target, desired, tuple(reasons), ReasonCode.NO_CANDIDATE))
        target = stabilize(plan_input, config, desired, reasons)
        target = _settled_early(plan_input, config, known, desired, target, reasons)
        return _remembered(plan_input, decided(plan_input.current_parallelism, target, desired, reasons))


class StaticPolicy:
    """A fixed scale-out (default: the maximum): the baseline every saving is measured against."""

    name = "static"
    uses_forecast = False
    sync_interval_s: float | None = None

    def decide(self, plan_input: PlanInput, config: PlannerConfig) -> Decision:
        """Always the configured static scale-out."""
        target = config.static_parallelism or config.max_parallelism
        return decided(plan_input.current_parallelism, target, target, (f"static policy: fixed scale-out {target}",))

"""Policies on real Flink: a trace replayed time-compressed through the trace-source job, ``perdix run`` scaling it.

Parts (lab/flink/harness.py): a loopback Flink 2.3 session cluster with N one-slot TaskManagers
(adaptive scheduler, Prometheus reporter), a real Prometheus scraping it every second, the
trace-source job (FLIP-27 log source, Zipf-skewed partitions, a map of fixed per-slot capacity, a
sink that verifies every offset), and ``perdix run`` with the ``flink-rest`` target rescaling it in
place. Every process is stopped by its pid whatever happens.

1. The job's capacity at every scale-out 1..N is measured first (lab/flink/capacity.py: a saturated
   run, then fixed-rate runs bisecting the largest rate whose backlog stays bounded), and the trace is
   scaled so that its peak needs ``--peak-fraction`` of the capacity at N slots.
2. The *ideal* is the sum over the replay's seconds of the fewest slots whose measured capacity
   exceeds that second's workload (no restarts, no forecast error: a floor, not a policy). The
   *failure-ready ideal* also has each second's slots work off a TaskManager failure right then within
   the target recovery time (:attr:`Setup.failure_ready_slots`), as Daedalus plans to: the real job's
   counterpart of the lab's failure-robust floor. Both read the capacities of step 1: where the backlog
   stops growing, extrapolated from the ``--probes`` runs it grew in (``lab.flink.capacity``; the middle
   of their bracket had counted a backlog growing by under 1 % of the rate as sustained, 1–5 % above).
3. Each policy runs on a fresh job for ``--minutes`` of production: the trace replayed at
   ``--compress`` trace seconds per wall second, then the job drains and the sink's counts are read.
   The agent runs Perdix's defaults for the flink-rest target with every time constant divided by the
   compression (loop 30 s → 30/c, or ``--loop-interval``; rate window, grace, stabilization, recent-rescale
   window, forecast window and horizon, target recovery 300 s → 300/c, checkpoint interval 10 s → 10/c for the
   job and the agent, downtime priors),
   so that a compressed minute looks to it like a real one. The flink-autoscaler's own windows
   (``flink_autoscaler.*``: 15-min metric window, 5-min stabilization, 1-h scale-down interval,
   catch-up and restart times, lag thresholds) and its 15-s reconcile are divided alike. What cannot
   be compressed: Flink's own restart (about a second).
4. Per policy: slot-seconds (slot-hours as ``worker_hours``), × each ideal, rescales, the SLO judgement of
   lab/slo.py on the lag Prometheus read (the stops from the agent's rescale log), max backlog, records
   produced vs verified at the sink (lost, duplicated). Written: ``summary.json`` (per run the keys of
   ``perdix evaluate``'s summaries where they apply), ``report.md`` (the table), ``<policy>.png``
   (workload and measured capacity, slots with rescales, backlog), ``capacities.json``.

Run (about 20 min of capacity measurement plus ``--minutes`` + ~2 min per policy):
    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_real_flink --trace traces/taylor.csv \\
        --policies daedalus,flink-autoscaler,static [--compress 10 --minutes 15] [--capacities FILE]
An earlier run against capacities measured again (the same replay; no cluster):
    .venv/bin/python -m benchmarks.bench_real_flink --rejudge OUT/summary.json --capacities FILE
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from agent.logging import configure_logging
from agent.settings import FlinkAutoscalerOptions, PrometheusSettings, Settings
from lab.flink.capacity import Capacity, max_sustainable_rate
from lab.flink.harness import (
    JobRecord,
    RealFlink,
    Rescale,
    rescales_from_log,
    stops_from_log,
)
from lab.flink.schedule import ProductionSchedule, read_trace
from lab.flink.trace_job import JobCounts, TraceJobOptions
from lab.slo import DEFAULT_FALLING_BEHIND_ALLOWANCE_S, judge
from models.recovery import recovery_time
from planner.defaults import IN_PLACE_LOOP_INTERVAL_S
from planner.flink_autoscaler import FlinkAutoscalerPolicy
from planner.peers import FlinkAutoscaler

_TIME_KEYS = (
    "loop_interval_s",
    "grace_period_s",
    "recent_rescale_window_s",
    "scale_down_stabilization_s",
    "forecast_horizon_s",
    "forecast_window_s",
    "target_recovery_time_s",
    "checkpoint_interval_s",
    "downtime_rescale_prior_s",
    "downtime_failure_prior_s",
)
DEFAULT_TIME: dict[str, Any] = {
    **{key: Settings.model_fields[key].default for key in _TIME_KEYS},
    "loop_interval_s": IN_PLACE_LOOP_INTERVAL_S,
    "rate_window_s": PrometheusSettings.model_fields["rate_window_s"].default,
}
"""Perdix's shipped time constants (agent/settings.py) on the flink-rest target the replay rescales through (its loop
where each rescale is aligned with a checkpoint), divided by the compression for a replay."""
FLINK_AUTOSCALER_TIME = {
    key: value for key, value in FlinkAutoscalerOptions().model_dump().items() if key != "target_utilization"
}
"""The flink-autoscaler's own time constants (the ``flink_autoscaler.*`` settings' defaults, its ``job.autoscaler.*``
ones), divided by the compression for a replay like Perdix's; it runs at the operator's 15-s reconcile, compressed
too."""
MINIMA = {"forecast_horizon_s": 60, "forecast_window_s": 60, "rate_window_s": 5}
"""The smallest values the settings accept."""


@dataclass(frozen=True)
class Setup:
    """What every policy's run shares."""

    trace: Path
    compress: float
    minutes: float
    taskmanagers: int
    capacity_per_slot: float
    partitions: int
    skew: float
    seed: int
    scale: float
    capacities: dict[int, float]
    loop_interval_s: float = DEFAULT_TIME["loop_interval_s"]
    """The agent's loop before compression (the shipped default unless ``--loop-interval``)."""

    @property
    def production_s(self) -> float:
        """Wall seconds of production per run."""
        return self.minutes * 60.0

    def time_knobs(self) -> dict[str, Any]:
        """Perdix's time constants divided by the compression (at least the settings' minima)."""
        knobs: dict[str, Any] = {}
        for key, value in {**DEFAULT_TIME, "loop_interval_s": self.loop_interval_s}.items():
            scaled = value / self.compress
            if isinstance(value, int):
                scaled = max(MINIMA.get(key, 1), round(scaled))
            knobs[key] = scaled
        rate_window = knobs.pop("rate_window_s")
        knobs["prometheus"] = {"rate_window_s": rate_window}
        return knobs

    def policy_knobs(self, policy: str) -> dict[str, Any]:
        """:meth:`time_knobs`, and for the flink-autoscaler its own windows and its sync, compressed alike."""
        knobs = self.time_knobs()
        if policy == FlinkAutoscaler.name:
            knobs["loop_interval_s"] = FlinkAutoscalerPolicy.sync_interval_s / self.compress
            knobs["flink_autoscaler"] = {key: value / self.compress for key, value in FLINK_AUTOSCALER_TIME.items()}
        return knobs

    def options(self, job_name: str, parallelism: int) -> TraceJobOptions:
        """The trace job of one run (epoch set at submission)."""
        return TraceJobOptions(
            job_name=job_name,
            trace=self.trace,
            compress=self.compress,
            scale=self.scale,
            partitions=self.partitions,
            skew=self.skew,
            seed=self.seed,
            capacity_per_subtask=self.capacity_per_slot,
            checkpoint_interval_s=DEFAULT_TIME["checkpoint_interval_s"] / self.compress,
            parallelism=parallelism,
            end_s=self.production_s,
        )

    def schedule(self) -> ProductionSchedule:
        """The production schedule every run replays (epoch 0)."""
        return replace(self.options("schedule", 1), epoch_ms=0).schedule()

    def workload(self) -> np.ndarray:
        """Records produced in each second of a run."""
        schedule = self.schedule()
        marks = np.array([schedule.produced_all(1000 * k) for k in range(int(self.production_s) + 1)], dtype=float)
        return np.diff(marks)

    def fewest_slots(self, rate: float) -> int:
        """The fewest slots whose measured capacity exceeds ``rate`` (N if none does)."""
        return next((n for n in sorted(self.capacities) if self.capacities[n] > rate), max(self.capacities))

    @cached_property
    def ideal_slots(self) -> np.ndarray:
        """Per second of the replay, the fewest slots that carry its workload (computed once per setup)."""
        return np.array([self.fewest_slots(w) for w in self.workload()], dtype=float)

    @cached_property
    def failure_ready_slots(self) -> np.ndarray:
        """Per second of the replay, the fewest slots that carry its workload *and* would work off a TaskManager
        failure right then within the target recovery time: the real job's counterpart of ``bench_robust_floor``
        (computed once per setup). The failure stops the job for the agent's failure-downtime prior and replays half
        a checkpoint interval (both compressed like the agent's), the true workload follows, and the job drains at
        its measured capacity (``models.recovery.recovery_time``). Like the ideal it knows the future and rescales
        for free; unlike it, it is ready for the failure the target promises to recover from, as Daedalus plans to
        be."""
        workload = self.workload()
        target = DEFAULT_TIME["target_recovery_time_s"] / self.compress
        downtime = DEFAULT_TIME["downtime_failure_prior_s"] / self.compress
        interval = DEFAULT_TIME["checkpoint_interval_s"] / self.compress
        horizon = int(math.ceil(3 * target))
        ahead = np.concatenate([workload, np.full(horizon, workload[-1] if workload.size else 0.0)])
        sizes = sorted(self.capacities)
        slots = np.empty(workload.size)
        for t, rate in enumerate(workload):
            recent = float(workload[max(0, t - int(math.ceil(interval))) : t + 1].mean())
            carry = self.fewest_slots(rate)
            slots[t] = next(
                (
                    n
                    for n in sizes
                    if n >= carry
                    and recovery_time(
                        capacity=self.capacities[n],
                        forecast=ahead[t : t + horizon],
                        replay_records=recent * interval / 2,
                        downtime_s=downtime,
                    )
                    <= target
                ),
                sizes[-1],
            )
        return slots


def ideal_slot_seconds(setup: Setup) -> tuple[float, np.ndarray]:
    """Σ over seconds of the fewest slots that carry that second's workload, and the per-second slots."""
    return float(setup.ideal_slots.sum()), setup.ideal_slots


def failure_ready_slot_seconds(setup: Setup) -> tuple[float, np.ndarray]:
    """Σ over seconds of the fewest slots that carry that second's workload and would work off a TaskManager
    failure right then within the target (:attr:`Setup.failure_ready_slots`), and the per-second slots."""
    return float(setup.failure_ready_slots.sum()), setup.failure_ready_slots


# ---------------------------------------------------------------------------------------------- capacities


def measure_capacities(harness: RealFlink, args: argparse.Namespace) -> dict[int, Capacity]:
    """The capacity at every scale-out 1..N (short fixed-rate runs)."""
    base = TraceJobOptions(
        job_name="perdix-capacity",
        rate_per_s=1.0,
        partitions=args.partitions,
        skew=args.skew,
        seed=args.seed,
        capacity_per_subtask=args.capacity,
        checkpoint_interval_s=DEFAULT_TIME["checkpoint_interval_s"] / args.compress,
    )
    out = {}
    for n in range(1, args.taskmanagers + 1):
        out[n] = max_sustainable_rate(harness, base, n, per_slot=args.capacity, probes=args.probes)
        print(
            f"capacity at {n} slots: {out[n].rate:,.0f}/s, where the backlog stops growing (the bounded test's "
            f"bracket {out[n].sustained:,.0f}..{out[n].failed:,.0f}/s; saturated estimate {out[n].saturated:,.0f}/s)",
            flush=True,
        )
    return out


# ---------------------------------------------------------------------------------------------- one policy


@dataclass
class PolicyRun:
    """One policy's run: its summary and the series of its plot."""

    summary: dict[str, Any]
    record: JobRecord
    rescales: list[Rescale]
    epoch: float


def run_policy(harness: RealFlink, setup: Setup, policy: str, workdir: Path, *, initial: int) -> PolicyRun:
    """A fresh job at ``initial`` slots, ``perdix run`` with ``policy``, the replay, the drain, the summary."""
    options = setup.options(f"perdix-bench-{policy}", initial)
    options = replace(options, epoch_ms=int(time.time() * 1000) + 3000)
    job = harness.submit(options)
    epoch = (options.epoch_ms or 0) / 1000
    target = DEFAULT_TIME["target_recovery_time_s"] / setup.compress
    agent = None
    try:
        settings = harness.settings(
            job, workdir, policy=policy, max_parallelism=setup.taskmanagers, **setup.policy_knobs(policy)
        )
        agent = harness.perdix(workdir, settings)
        started = time.time()
        last_report = started
        while time.time() < epoch + setup.production_s:
            harness.wait_until(job, min(epoch + setup.production_s, time.time() + 30), agent=agent)
            if time.time() - last_report >= 120:
                last_report = time.time()
                rescales = rescales_from_log(agent.events())
                current = rescales[-1].to_parallelism if rescales else initial
                print(
                    f"  {policy}: {time.time() - epoch:.0f}/{setup.production_s:.0f} s, {len(rescales)} rescales, "
                    f"now {current} slots",
                    flush=True,
                )
        counts, expected = harness.drained(job, timeout_s=180)
        agent.stop()
        events = agent.events()
    finally:
        if agent is not None:
            agent.stop()
        harness.cancel(job)
    rescales = rescales_from_log(events)
    record = harness.record(job, seconds=int(setup.production_s), rescales=rescales)
    summary = summarize(setup, policy, record, rescales, counts, expected, epoch=epoch, target=target, events=events)
    return PolicyRun(summary, record, rescales, epoch)


def summarize(
    setup: Setup,
    policy: str,
    record: JobRecord,
    rescales: list[Rescale],
    counts: JobCounts,
    expected: int,
    *,
    epoch: float,
    target: float,
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run's summary: the keys of ``lab.replay.job_summary`` where they apply, plus the real job's own."""
    # The SLO's falling-behind allowance (60 s) is a time constant like the target: compressed alike.
    verdict = judge(
        record.lag,
        record.workload,
        stops_from_log(rescales, epoch),
        target_recovery_time_s=target,
        falling_behind_allowance_s=DEFAULT_FALLING_BEHIND_ALLOWANCE_S / setup.compress,
    )
    slot_seconds = float(record.parallelism.sum())
    ideal, _ = ideal_slot_seconds(setup)
    ready, _ = failure_ready_slot_seconds(setup)
    capacity = np.array([setup.capacities.get(int(n), 0.0) for n in record.parallelism])
    spare = capacity - record.workload
    over_target = (record.lag > np.maximum(spare, 0.0) * target) & (record.lag > record.workload)
    verified = counts.verified or 0
    return {
        "trace": setup.trace.stem,
        "policy": policy,
        "duration_s": int(setup.production_s),
        "worker_hours": round(slot_seconds / 3600.0, 4),
        "slot_seconds": slot_seconds,
        "ideal_slot_seconds": ideal,
        "x_ideal": round(slot_seconds / ideal, 4) if ideal else None,
        "failure_ready_slot_seconds": ready,
        "x_failure_ready": round(slot_seconds / ready, 4) if ready else None,
        "rescales": len(rescales),
        "rescales_proposed": sum(
            1 for e in events if e.get("event") in ("rescale", "rescale.dry_run", "rescale.failed")
        ),
        "failures": 0,
        "recoveries": len(verdict.episodes),
        "recoveries_incomplete": verdict.cut_short,
        "recovery_max_s": float(verdict.longest_episode_s),
        **verdict.to_summary(),
        "lag_over_target_s": int(over_target.sum()),
        "max_lag_records": int(record.lag.max()) if record.lag.size else 0,
        "records_produced": expected,
        "records_processed": verified,
        "records_lost": int(counts.lost or 0)
        + max(0, expected - verified - int(counts.ahead or 0) - int(counts.pending or 0)),
        "records_duplicated": int(counts.duplicates or 0),
        "records_pending_at_end": int(counts.pending or 0),
        "final_parallelism": int(record.parallelism[-1]) if record.parallelism.size else None,
        "target_recovery_time_s": target,
        "recoveries_measured": sum(1 for e in events if e.get("event") == "recovery.measured"),
        "recoveries_overdue": sum(1 for e in events if e.get("event") == "recovery.overdue"),
        "compress": setup.compress,
    }


# ---------------------------------------------------------------------------------------------- output


def plot_run(run: PolicyRun, setup: Setup, path: Path) -> None:
    """Workload with the measured capacity of the running slots; slots with the rescales; backlog."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    record, summary = run.record, run.summary
    minutes = record.time_s / 60.0
    fig, (ax_rate, ax_par, ax_lag) = plt.subplots(3, 1, figsize=(11, 8), sharex=True, constrained_layout=True)
    fig.suptitle(
        f"{summary['trace']} on real Flink — {summary['policy']}: {summary['slot_seconds'] / 60:.0f} slot-minutes "
        f"({summary['x_ideal']:.2f}× ideal), {summary['rescales']} rescales, {summary['slo_misses']} SLO misses"
    )
    capacity = np.array([setup.capacities.get(int(n), np.nan) for n in record.parallelism])
    ax_rate.plot(minutes, record.workload / 1000, lw=0.6, color="tab:blue", label="workload")
    ax_rate.plot(minutes, capacity / 1000, lw=1.0, color="tab:green", label="capacity of the running slots (measured)")
    ax_rate.set_ylabel("k records/s")
    ax_rate.legend(loc="upper left", fontsize=8)
    _, ideal = ideal_slot_seconds(setup)
    ax_par.step(minutes, ideal[: minutes.size], where="post", color="grey", lw=0.8, ls="--", label="ideal")
    ax_par.step(minutes, record.parallelism, where="post", color="tab:purple", label=summary["policy"])
    for rescale in run.rescales:
        ax_par.axvline((rescale.requested_at - run.epoch) / 60.0, color="tab:red", lw=0.6)
    ax_par.set_ylabel("slots")
    ax_par.legend(loc="upper left", fontsize=8)
    ax_lag.plot(minutes, np.maximum(record.lag, 0) / 1000, lw=0.7, color="tab:red")
    ax_lag.set_ylabel("backlog (k records)")
    ax_lag.set_xlabel("wall minutes")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(runs: dict[str, PolicyRun], ideal: float, ready: float) -> str:
    """The markdown table of the runs."""
    lines = [
        f"ideal: {ideal:,.0f} slot-seconds; failure-ready ideal: {ready:,.0f}",
        "",
        "| policy | slot-seconds | × ideal | × failure-ready | rescales | SLO misses | longest episode (s) "
        "| max backlog | produced | verified | lost | duplicated |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, run in runs.items():
        s = run.summary
        lines.append(
            f"| {policy} | {s['slot_seconds']:,.0f} | {s['x_ideal']:.3f} | {s['x_failure_ready']:.3f} | "
            f"{s['rescales']} | {s['slo_misses']} | "
            f"{s['slo_longest_episode_s']} | {s['max_lag_records']:,} | {s['records_produced']:,} | "
            f"{s['records_processed']:,} | {s['records_lost']} | {s['records_duplicated']} |"
        )
    return "\n".join(lines)


def read_capacities(path: Path) -> dict[int, float]:
    """The capacity at each scale-out from a ``capacities.json`` this benchmark wrote: read from its measurements
    (:attr:`Capacity.rate`, so a file keeps up with how a measurement is read), else its capacities."""
    data = json.loads(path.read_text())
    measured = data.get("measurements") or {}
    if measured:
        return {int(n): Capacity.from_dict(m).rate for n, m in measured.items()}
    return {int(n): float(c) for n, c in data["capacity"].items()}


def make_setup(
    args: argparse.Namespace, trace: tuple[tuple[float, ...], tuple[float, ...]], capacities: dict[int, float]
) -> Setup:
    """The runs' shared setup: the trace (``read_trace``'s times and rates) scaled so that its peak over the replay
    needs ``--peak-fraction`` of the capacity at the largest scale-out."""
    times, rates = trace
    covered = args.minutes * 60.0 * args.compress
    peak = max(r for t, r in zip(times, rates) if t <= covered)
    return Setup(
        args.trace,
        args.compress,
        args.minutes,
        args.taskmanagers,
        args.capacity,
        args.partitions,
        args.skew,
        args.seed,
        args.peak_fraction * capacities[max(capacities)] / peak,
        capacities,
        args.loop_interval,
    )


def describe(setup: Setup) -> str:
    """One line: the replay, its workload, the capacities and both ideals."""
    ideal, slots = ideal_slot_seconds(setup)
    ready, ready_slots = failure_ready_slot_seconds(setup)
    workload = setup.workload()
    return (
        f"trace {setup.trace.name}: {setup.production_s * setup.compress / 3600:.1f} trace hours in "
        f"{setup.minutes:g} min, scale {setup.scale:.5f} (workload {workload.min():,.0f}..{workload.max():,.0f}/s); "
        "capacities "
        + ", ".join(f"{n}: {c:,.0f}" for n, c in sorted(setup.capacities.items()))
        + f"; ideal {ideal:,.0f} slot-seconds (mean {slots.mean():.2f} slots), failure-ready ideal {ready:,.0f} "
        f"(mean {ready_slots.mean():.2f})"
    )


def rejudge(summary_path: Path, capacities: dict[int, float]) -> str:
    """An earlier run's policies against the ideals at ``capacities``: the same replay (its trace, compression and
    scale), so only the capacities the ideals are read from change."""
    summary = json.loads(summary_path.read_text())
    was = summary["setup"]
    setup = Setup(
        Path(was["trace"]),
        float(was["compress"]),
        float(was["minutes"]),
        int(was["taskmanagers"]),
        float(was["capacity_per_slot"]),
        int(was["partitions"]),
        float(was["skew"]),
        int(was["seed"]),
        float(was["scale"]),
        capacities,
    )
    ideal, _ = ideal_slot_seconds(setup)
    ready, _ = failure_ready_slot_seconds(setup)
    lines = [
        describe(setup),
        f"(the run's own ideal: {was['ideal_slot_seconds']:,.0f} slot-seconds at capacities "
        + ", ".join(f"{n}: {float(c):,.0f}" for n, c in sorted(was["capacities"].items(), key=lambda kv: int(kv[0])))
        + ")",
        "",
        "| policy | slot-seconds | × ideal then | × ideal | × failure-ready | SLO misses |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in summary["runs"]:
        lines.append(
            f"| {run['policy']} | {run['slot_seconds']:,.0f} | {run['x_ideal']:.3f} | "
            f"{run['slot_seconds'] / ideal:.3f} | {run['slot_seconds'] / ready:.3f} | {run['slo_misses']} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Measure the capacities, replay the trace under each policy, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, help="the workload replayed (CSV of time, rate)")
    parser.add_argument("--policies", default="daedalus,flink-autoscaler,static")
    parser.add_argument("--compress", type=float, default=10.0, help="trace seconds per wall second")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall minutes of production per policy")
    parser.add_argument("--taskmanagers", type=int, default=6, help="one-slot TaskManagers (the largest scale-out)")
    parser.add_argument("--capacity", type=float, default=1000.0, help="records/s one slot's map carries")
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--skew", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--peak-fraction",
        type=float,
        default=0.8,
        help="the replay's peak workload as a fraction of the capacity at the largest scale-out",
    )
    parser.add_argument(
        "--probes",
        type=int,
        default=6,
        help="fixed-rate runs per scale-out after the saturated one: two or three find a bracket 8 %% wide, each "
        "after halves it (6 leave the capacity within ±0.5 %%)",
    )
    parser.add_argument(
        "--capacities", type=Path, default=None, help="capacities.json of an earlier run: skip measuring"
    )
    parser.add_argument(
        "--loop-interval",
        type=float,
        default=DEFAULT_TIME["loop_interval_s"],
        help="the agent's loop in trace seconds, compressed like the other time constants (default: the shipped "
        "loop_interval_s of the flink-rest target, 30)",
    )
    parser.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        help="summary.json of an earlier run: its runs against the ideals at --capacities (the same replay, the "
        "capacities measured again, e.g. with more --probes), printed; no cluster, no runs",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench_real_flink"))
    args = parser.parse_args()
    if not args.loop_interval > 0:
        parser.error(f"--loop-interval: {args.loop_interval:g} is not a positive number of seconds")
    if args.rejudge is None and args.trace is None:
        parser.error("--trace is required (a CSV of time, rate), unless --rejudge")
    # Bad input stops the run here, not after a cluster has been started for it.
    trace = None
    if args.trace is not None:
        try:
            trace = read_trace(args.trace)
        except ValueError as exc:
            parser.error(f"--trace: {exc}")
    given = None
    if args.capacities is not None:
        try:
            given = read_capacities(args.capacities)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            parser.error(f"--capacities {args.capacities}: {type(exc).__name__}: {exc}")
    if args.rejudge is not None:
        if given is None:
            parser.error("--rejudge needs --capacities (a capacities.json of a capacity measurement)")
        print(rejudge(args.rejudge, given))
        return
    assert trace is not None  # required above unless --rejudge
    configure_logging("console", "error")
    args.out.mkdir(parents=True, exist_ok=True)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    with tempfile.TemporaryDirectory(prefix="perdix-bench-real-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        with RealFlink.start(
            work,
            taskmanagers=args.taskmanagers,
            checkpoint_interval_s=max(1, round(DEFAULT_TIME["checkpoint_interval_s"] / args.compress)),
        ) as harness:
            print(f"cluster with {args.taskmanagers} TaskManagers up in {time.monotonic() - started:.0f} s", flush=True)
            if given is not None:
                capacities = given
            else:
                measured = measure_capacities(harness, args)
                capacities = {n: c.rate for n, c in measured.items()}
                (args.out / "capacities.json").write_text(
                    json.dumps(
                        {
                            "capacity": {str(n): c for n, c in capacities.items()},
                            "measurements": {str(n): asdict(c) for n, c in measured.items()},
                        },
                        indent=1,
                        default=str,
                    )
                )
            setup = make_setup(args, trace, capacities)
            ideal, slots = ideal_slot_seconds(setup)
            ready, _ = failure_ready_slot_seconds(setup)
            print(describe(setup), flush=True)
            print(f"agent time constants: {setup.time_knobs()}", flush=True)
            runs: dict[str, PolicyRun] = {}
            for policy in policies:
                print(f"{policy}: replaying ...", flush=True)
                # Every policy starts where the ideal starts, except static, which holds the largest scale-out
                # throughout.
                initial = args.taskmanagers if policy == "static" else int(slots[0])
                runs[policy] = run_policy(harness, setup, policy, work / policy, initial=initial)
                s = runs[policy].summary
                print(
                    f"{policy}: {s['slot_seconds']:,.0f} slot-seconds ({s['x_ideal']:.3f}× ideal, "
                    f"{s['x_failure_ready']:.3f}× failure-ready), "
                    f"{s['rescales']} rescales, {s['slo_misses']} SLO misses, "
                    f"max backlog {s['max_lag_records']:,}, produced {s['records_produced']:,}, "
                    f"verified {s['records_processed']:,}, lost {s['records_lost']}, "
                    f"duplicated {s['records_duplicated']}",
                    flush=True,
                )
                plot_run(runs[policy], setup, args.out / f"{policy}.png")
                (args.out / f"{policy}.log").write_text((work / policy / "perdix.log").read_text(errors="replace"))
                _write(args, setup, runs, ideal, ready)
    print(table(runs, ideal, ready))
    print(f"wrote {args.out}/summary.json, report.md and a plot per policy; {time.monotonic() - started:.0f} s in all")


def _write(args: argparse.Namespace, setup: Setup, runs: dict[str, PolicyRun], ideal: float, ready: float) -> None:
    summary = {
        "setup": {
            "trace": str(setup.trace),
            "compress": setup.compress,
            "minutes": setup.minutes,
            "taskmanagers": setup.taskmanagers,
            "capacity_per_slot": setup.capacity_per_slot,
            "partitions": setup.partitions,
            "skew": setup.skew,
            "seed": setup.seed,
            "scale": setup.scale,
            "capacities": {str(n): c for n, c in setup.capacities.items()},
            "ideal_slot_seconds": ideal,
            "failure_ready_slot_seconds": ready,
            "agent_time_constants": setup.time_knobs(),
        },
        "runs": [run.summary for run in runs.values()],
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=_json))
    (args.out / "report.md").write_text("# Policies on a real Flink job\n\n" + table(runs, ideal, ready) + "\n")


def _json(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


if __name__ == "__main__":
    main()

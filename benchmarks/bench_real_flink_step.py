"""Reaction time on a real Flink job: from a workload step to Daedalus's rescale request and to the lag caught up.

The scenario of tests/flink/test_e2e_daedalus.py, repeated: three one-slot TaskManagers, the trace-source
job (12 partitions with Zipf 0.5 skew, 2,000 records/s per slot, 10-s checkpoints), ``perdix run`` with
Daedalus, the shipped defaults and the same short-run time knobs (5-s loop, 10-s rates, 10-s grace, 20-s
recent-rescale hold and stabilization, 60-s forecast, 40-s target recovery, at most 3 slots). The workload
alternates ``--cycles`` times between 700/s (one slot) and 3,000/s (three slots) in phases of
``--phase`` seconds. Per step it prints the seconds from the step to the rescale request, to the
confirmed rescale, and to the end of the SLO episode (lag back under one second of input, lab/slo.py),
and whether the agent called the recovery overdue; then, for the first step up, every round's forecast
peak and where it came from (a step must be forecast at its new level, not as a ramp).

``--defaults``: every time knob at its shipped default instead (the flink-rest target's 30-s loop, 60-s rates,
120-s grace, 300-s recent-rescale hold and scale-in stabilization, 900-s forecast window and horizon, 300-s target
recovery, ``max_parallelism`` 16 on the three slots; only the job's 10-s checkpoints and a 2-s rescale downtime
prior set), Prometheus scraping every 15 s, the first step after 180 s: Perdix as an operator would first run it.
Use phases of several minutes (``--cycles 1 --phase 420``).

Run (about 1 + 2 × cycles × phase / 60 minutes):
    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_real_flink_step [--cycles 3] [--phase 70]
    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_real_flink_step --defaults --cycles 1 --phase 420
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.logging import configure_logging
from lab.flink.harness import RealFlink, log_time, rescales_from_log, stops_from_log
from lab.flink.trace_job import TraceJobOptions
from lab.slo import judge

LOW, HIGH = 700.0, 3000.0
FIRST_S = 45.0
"""Seconds at LOW before the first step (the forecaster needs about 40 s of settled rates)."""
TARGET_S = 40.0
KNOBS: dict[str, Any] = {
    "loop_interval_s": 5.0,
    "grace_period_s": 10.0,
    "recent_rescale_window_s": 20.0,
    "scale_down_stabilization_s": 20.0,
    "forecast_horizon_s": 60,
    "forecast_window_s": 60,
    "target_recovery_time_s": TARGET_S,
    "max_parallelism": 3,
    "prometheus": {"rate_window_s": 10},
}
"""The short-run time knobs of tests/flink/test_e2e_daedalus.py (justified there)."""
DEFAULTS: dict[str, Any] = {"checkpoint_interval_s": 10.0, "downtime_rescale_prior_s": 2.0}
"""``--defaults``: the job's description the README's smallest flink-rest configuration gives; every time knob and
``max_parallelism`` (16: Perdix plans within the cluster's three free slots) are the shipped ones."""


def main() -> None:
    """Run the alternating steps once and print a row per step and the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--phase", type=float, default=70.0, help="seconds per phase (HIGH and LOW)")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="every time knob at its default, Prometheus scraping every 15 s, the first step after 180 s",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="work in DIR and keep it (the agent's log and knowledge, Flink's and Prometheus' files)",
    )
    args = parser.parse_args()
    configure_logging("console", "error")
    knobs, target_s, first_s = (DEFAULTS, 300.0, 180.0) if args.defaults else (KNOBS, TARGET_S, FIRST_S)
    steps = [(first_s + k * args.phase, HIGH if k % 2 == 0 else LOW) for k in range(2 * args.cycles)]
    end_s = first_s + 2 * args.cycles * args.phase
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (
        (
            contextlib.nullcontext(str(args.keep))
            if args.keep is not None
            else tempfile.TemporaryDirectory(prefix="perdix-bench-step-")
        ) as tmp,
        RealFlink.start(
            Path(tmp), taskmanagers=3, checkpoint_interval_s=10, scrape_interval="15s" if args.defaults else "1s"
        ) as harness,
    ):
        trace = Path(tmp) / "steps.csv"
        points = [(0.0, LOW)]
        level = LOW
        for at, new in steps:
            points += [(at, level), (at + 0.1, new)]
            level = new
        points.append((end_s + 60, level))
        trace.write_text("time_s,rate\n" + "".join(f"{t:g},{r:g}\n" for t, r in points))
        options = TraceJobOptions(
            job_name="perdix-step-bench",
            trace=trace,
            partitions=12,
            skew=0.5,
            seed=1,
            capacity_per_subtask=2000.0,
            checkpoint_interval_s=10.0,
            parallelism=1,
            epoch_ms=int(time.time() * 1000) + 3000,
            end_s=end_s,
        )
        job = harness.submit(options)
        epoch = (options.epoch_ms or 0) / 1000
        agent = harness.perdix(Path(tmp) / "agent", harness.settings(job, Path(tmp) / "agent", **knobs))
        harness.wait_until(job, epoch + end_s, agent=agent)
        counts, expected = harness.drained(job, timeout_s=90)
        agent.stop()
        events = agent.events()
        rescales = rescales_from_log(events)
        record = harness.record(job, seconds=int(end_s), rescales=rescales)
        verdict = judge(record.lag, record.workload, stops_from_log(rescales, epoch), target_recovery_time_s=target_s)
        overdue = [float(e["started_at"]) - epoch for e in events if e.get("event") == "recovery.overdue"]
        harness.cancel(job)
    moments = [(r.from_parallelism, r.to_parallelism, round(r.requested_at - epoch, 1)) for r in rescales]
    print(f"rescales (s after the epoch): {moments}")
    print(
        f"SLO episodes: {[(e.kind, e.start_s, e.end_s) for e in verdict.episodes]}; misses {verdict.misses}; "
        f"overdue at {[round(t) for t in overdue]}; records {counts.verified}/{expected} verified, "
        f"{counts.lost} lost, {counts.duplicates} duplicated"
    )
    print(
        "\n| step at (s) | to | request after (s) | confirmed after (s) | caught up after (s) "
        "| rescales in the phase | overdue |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    ups, catch = [], []
    for index, (at, new) in enumerate(steps):
        until = steps[index + 1][0] if index + 1 < len(steps) else end_s
        mine = [r for r in rescales if at <= r.requested_at - epoch < until]
        first = mine[0] if mine else None
        episode = next(
            (
                e
                for e in verdict.episodes
                if first is not None
                and e.start_s <= first.requested_at - epoch + 1
                and (e.end_s is None or e.end_s >= first.requested_at - epoch)
            ),
            None,
        )
        caught = None if episode is None or episode.end_s is None else episode.end_s - at
        late = any(at <= t < until for t in overdue)
        request = None if first is None else first.requested_at - epoch - at
        confirmed = None if first is None else first.confirmed_at - epoch - at
        if new == HIGH and request is not None:
            ups.append(request)
            if caught is not None:
                catch.append(caught)
        print(
            f"| {at:.0f} | {new:,.0f}/s | {_fmt(request)} | {_fmt(confirmed)} | {_fmt(caught)} "
            f"| {len(mine)} | {'yes' if late else 'no'} |"
        )
    first_at, first_until = steps[0][0], steps[1][0] if len(steps) > 1 else end_s
    rounds = [
        (log_time(e) - epoch - first_at, e.get("forecast_peak"), e.get("forecast_source"))
        for e in events
        if e.get("event") == "loop" and first_at <= log_time(e) - epoch < first_until
    ]
    peaks = [peak for _, peak, _ in rounds if isinstance(peak, (int, float))]
    print(
        f"\nforecast after the first step up to {HIGH:,.0f}/s (s after it, peak, source): "
        f"{[(round(t), peak, source) for t, peak, source in rounds]}; highest peak "
        f"{max(peaks) if peaks else float('nan'):,.0f}/s"
    )
    if ups:
        print(
            f"\nstep up: request after {statistics.median(ups):.1f} s (median of {len(ups)}), "
            f"caught up after {statistics.median(catch) if catch else float('nan'):.1f} s (target {target_s:g} s)"
        )


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()

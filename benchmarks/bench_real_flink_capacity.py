"""Capacity error on a real Flink job: what Perdix estimates at 1, 2, 3 slots against the measured maximum.

For each scale-out n (lab/flink/harness.py: a loopback cluster of three one-slot TaskManagers, a real
Prometheus, the trace-source job: 12 partitions with Zipf 0.5 skew, 2,000 records/s per slot):

1. the job's maximum sustainable rate at n slots, measured (lab/flink/capacity.py): a saturated run
   gives an estimate, then fixed-rate runs bisect around it, and the rate where the backlog stops
   growing is extrapolated from those it grew in;
2. Perdix's estimate: the job at a steady fixed rate below saturation (``--loads``, fractions of the
   measured maximum), ``perdix run --dry-run`` with Daedalus and the shipped defaults but the time
   knobs of a short run (5-s loop, 10-s rates), and the analyzer's capacity at the current scale-out
   (the ``capacity`` of the ``loop`` log event), median of the last ``--loops`` rounds after the rates
   settled.

Flink's busy time has a floor (30-40 ms/s per source subtask at no load), so throughput / busy reads
low, more so at low load; this benchmark reports what Perdix estimates and does not tune it.

Run (about 4 min per scale-out):
    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_real_flink_capacity [--loads 0.6] [--slots 1,2,3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from agent.logging import configure_logging
from lab.flink.capacity import max_sustainable_rate
from lab.flink.harness import RealFlink
from lab.flink.trace_job import TraceJobOptions

PER_SLOT = 2000.0
LOOP_S = 5.0
RATE_WINDOW_S = 10


def perdix_estimate(
    harness: RealFlink, base: TraceJobOptions, slots: int, rate: float, workdir: Path, *, loops: int, taskmanagers: int
) -> tuple[float, list[float]]:
    """Median over ``loops`` settled rounds of the analyzer's capacity at the current scale-out, and every value."""
    options = replace(
        base,
        job_name=f"perdix-capacity-{slots}",
        rate_per_s=rate,
        parallelism=slots,
        epoch_ms=int(time.time() * 1000) + 2000,
        end_s=None,
    )
    job = harness.submit(options)
    agent = None
    try:
        settings = harness.settings(
            job,
            workdir,
            loop_interval_s=LOOP_S,
            max_parallelism=taskmanagers,
            prometheus={"rate_window_s": RATE_WINDOW_S},
        )
        agent = harness.perdix(workdir, settings, dry_run=True)

        # Rounds whose rates are settled (the job has run longer than the rate window) and that read a capacity.
        def values() -> list[float]:
            return [
                float(e["capacity"])
                for e in agent.events("loop")
                if e.get("capacity") is not None and e.get("parallelism") == slots
            ]

        deadline = time.time() + 60 + loops * LOOP_S * 2
        while len(values()) < loops + 2 and time.time() < deadline:
            harness.wait_until(job, time.time() + LOOP_S, agent=agent)
        found = values()[2:]  # the first rounds' windows reach back to the job's start
    finally:
        if agent is not None:
            agent.stop()
        harness.cancel(job)
    if not found:
        raise RuntimeError(f"no capacity in Perdix's loop events at {slots} slots:\n{agent.tail() if agent else ''}")
    last = found[-loops:]
    return statistics.median(last), last


def main() -> None:
    """Measure and estimate at every asked scale-out; print one row each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", default="1,2,3")
    parser.add_argument("--loads", default="0.6", help="steady rates as fractions of the measured maximum")
    parser.add_argument("--loops", type=int, default=6, help="settled rounds whose median is Perdix's estimate")
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args()
    configure_logging("console", "error")
    slots = [int(s) for s in args.slots.split(",")]
    loads = [float(x) for x in args.loads.split(",")]
    base = TraceJobOptions(
        job_name="perdix-capacity",
        rate_per_s=1.0,
        partitions=12,
        skew=0.5,
        seed=1,
        capacity_per_subtask=PER_SLOT,
        checkpoint_interval_s=10.0,
    )
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="perdix-bench-capacity-") as tmp,
        RealFlink.start(Path(tmp), taskmanagers=max(slots)) as harness,
    ):
        for n in slots:
            measured = max_sustainable_rate(harness, base, n, per_slot=PER_SLOT, probes=args.probes)
            print(
                f"{n} slots: maximum sustainable rate {measured.rate:,.0f}/s "
                f"(bounded at {measured.sustained:,.0f}, grows at {measured.failed:,.0f}; saturated estimate "
                f"{measured.saturated:,.0f})",
                flush=True,
            )
            for load in loads:
                rate = load * measured.rate
                estimate, values = perdix_estimate(
                    harness, base, n, rate, Path(tmp) / f"agent-{n}-{load}", loops=args.loops, taskmanagers=max(slots)
                )
                error = (estimate - measured.rate) / measured.rate
                rows.append((n, measured.rate, measured.resolution, load, rate, estimate, error, values))
                print(
                    f"  at {rate:,.0f}/s ({load:.0%}): Perdix estimates {estimate:,.0f}/s, error {error:+.1%} "
                    f"(rounds: {', '.join(f'{v:,.0f}' for v in values)})",
                    flush=True,
                )
    print("\n| slots | measured max (±) | load | Perdix's capacity | error |\n|---:|---:|---:|---:|---:|")
    for n, measured_rate, resolution, load, _, estimate, error, _ in rows:
        print(f"| {n} | {measured_rate:,.0f} (±{resolution:.1%}) | {load:.0%} | {estimate:,.0f} | {error:+.1%} |")


if __name__ == "__main__":
    main()

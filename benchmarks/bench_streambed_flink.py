"""StreamBed on a real Flink cluster: the prediction at the largest scale-out the machine allows vs its measured MST.

Starts a loopback Flink 2.3 session cluster with ``--check-slots``' largest count of one-slot
TaskManagers and a Prometheus scraping it each second, plans a capacity model on the trace job at
small scale-outs (``--plan-slots``, default 1-2 slots, at most ``--max-runs`` testbed runs: each a
Capacity Estimator binary search over fresh submissions at fixed rates), and then measures the MST
at the larger scale-outs (default 3 and 4 slots) with the same estimator, to compare with the model.
Beside it: the MST per slot at every measured scale-out (does the job scale linearly on this
machine?), and the CPU the cluster's JVMs used while saturated.

    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_streambed_flink \\
        [--capacity-per-slot 2000] [--max-runs 6] [--check-slots 3,4] [--repeats 1] [--out out/bench_streambed_flink]

About ten minutes at the defaults (a testbed run is 30 s; the cluster takes 20-40 s to start).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.capacity_plan import RunReport, plan_capacity
from lab.flink.testbed import (
    FlinkTestbed,
    FlinkTestbedSettings,
    PhaseEvent,
    estimator_settings,
    open_flink_testbed,
)
from models.streambed import EstimatorSettings, estimate_capacity


def cpu_seconds(pids: tuple[int, ...]) -> float:
    """User + system CPU seconds the processes have used so far (from /proc)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class CpuMeter:
    """Cores the cluster's JVMs used over each warmup and probe (submission to measurement)."""

    pids: tuple[int, ...] = ()
    started: tuple[float, float] | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: PhaseEvent) -> None:
        now = (time.monotonic(), cpu_seconds(self.pids))
        if event.kind == "cluster-warmup":
            print(f"  cluster warm-up: {event.parallelism} slots at {event.rate:,.0f}/s", flush=True)
            return
        if event.kind in ("warmup", "probe"):
            self.started = now
            return
        if self.started is not None:
            wall, cpu = now[0] - self.started[0], now[1] - self.started[1]
            self.phases.append(
                {
                    "slots": event.parallelism,
                    "rate": event.rate,
                    "read": event.achieved_rate,
                    "backlog_growth": event.lag_growth,
                    "cores": cpu / wall if wall > 0 else 0.0,
                    "load_1m": os.getloadavg()[0],
                }
            )
        print(
            f"    {event.parallelism} slots at {event.rate:,.0f}/s: read {event.achieved_rate or 0:,.0f}/s, "
            f"backlog {event.lag_growth or 0:+,.1f}/s, JVMs {self.phases[-1]['cores']:.2f} cores",
            flush=True,
        )


def measure_mst(bed: FlinkTestbed, slots: int, settings: EstimatorSettings, repeats: int) -> list[float]:
    """The MST at ``slots`` from ``repeats`` capacity estimations."""
    return [estimate_capacity(bed.deploy((slots,), bed.memory_mb), settings).mst for _ in range(repeats)]


def main() -> None:
    """Plan at small scale-outs, measure the large ones, print and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacity-per-slot", type=float, default=2000.0, help="the trace job's --capacity")
    parser.add_argument("--plan-slots", default="1-2", help="task slots the plan explores, MIN-MAX")
    parser.add_argument("--check-slots", default="3,4", help="scale-outs measured against the model")
    parser.add_argument("--max-runs", type=int, default=6, help="testbed runs of the plan (<= 10)")
    parser.add_argument("--repeats", type=int, default=1, help="capacity estimations per checked scale-out")
    parser.add_argument("--measure-s", type=int, default=10)
    parser.add_argument("--rampup-s", type=int, default=3)
    parser.add_argument("--skew", type=float, default=0.0)
    parser.add_argument("--min-rate-fraction", type=float, default=0.8, help="search floor (lower it with skew)")
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument(
        "--cluster-warmup-s", type=float, default=45.0, help="overload on every slot before the first run"
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench_streambed_flink"))
    args = parser.parse_args()
    low, high = (int(x) for x in args.plan_slots.split("-"))
    checks = sorted({int(x) for x in args.check_slots.split(",")})
    estimator = estimator_settings(
        rampup_s=args.rampup_s, measure_s=args.measure_s, probes=args.probes, min_rate_fraction=args.min_rate_fraction
    )
    settings = FlinkTestbedSettings(
        capacity_per_slot=args.capacity_per_slot, skew=args.skew, cluster_warmup_s=args.cluster_warmup_s
    )
    meter = CpuMeter()
    runs: list[RunReport] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="perdix-bench-streambed-") as workdir,
        open_flink_testbed(slots=max(checks + [high]), settings=settings, workdir=Path(workdir), on_phase=meter) as bed,
    ):
        meter.pids = bed.process_ids
        up_s = time.monotonic() - started
        print(
            f"cluster of {max(checks + [high])} one-slot TaskManagers ({bed.memory_mb:.0f} MB per slot) up in "
            f"{up_s:.0f} s; plan at {low}-{high} slots, {args.max_runs} runs",
            flush=True,
        )

        def progress(report: RunReport) -> None:
            runs.append(report)
            print(
                f"  run {report.index}/{report.max_runs}: {report.task_slots} slots, MST {report.mst:,.0f} rec/s",
                flush=True,
            )

        plan_started = time.monotonic()
        model = plan_capacity(
            target_rate=10 * args.capacity_per_slot,
            max_runs=args.max_runs,
            out_path=args.out / "capacity.json",
            progress=progress,
            testbed=bed,
            min_testbed_slots=low,
            max_testbed_slots=high,
            memory_profiles_mb=(bed.memory_mb,),
            production_memory_mb=bed.memory_mb,
            max_scale_out=max(checks),
            estimator=estimator,
            job_name=bed.job_name,
            testbed_info=bed.describe(),
        )
        plan_s = time.monotonic() - plan_started
        print(
            f"model: {model.surrogate.family} "
            f"({'' if model.validation['families_identifiable'] else 'families not identifiable, '}"
            f"LOOCV RMSE {model.validation['loocv_rmse'] or float('nan'):,.0f}); plan took {plan_s:.0f} s",
            flush=True,
        )
        measured: dict[int, list[float]] = {}
        for slots in checks:
            print(f"  measuring {slots} slots", flush=True)
            measured[slots] = measure_mst(bed, slots, estimator, args.repeats)

    planned: dict[int, list[float]] = {}
    for o in model.observations:
        planned.setdefault(int(o["task_slots"]), []).append(float(o["capacity"]))
    rows = []
    print(
        f"\nStreamBed on real Flink: trace job "
        f"(chained, {args.capacity_per_slot:.0f} records/s per slot, skew {args.skew:g}), "
        f"plan at {low}-{high} slots from {model.testbed_runs} testbed runs ({plan_s:.0f} s)"
    )
    print(f"{'slots':>5} {'predicted':>10} {'measured MST':>13} {'error':>7} {'MST/slot':>9} {'x slot 1':>8}  source")
    one_slot = statistics.mean(planned.get(1) or measured.get(1) or [float("nan")])
    for slots in sorted(set(planned) | set(measured)):
        values = planned.get(slots) or measured.get(slots) or []
        mean = statistics.mean(values)
        predicted = model.surrogate.capacity_at(slots, model.memory_mb)
        error = (predicted - mean) / mean
        source = "plan (explored)" if slots in planned else "measured"
        rows.append(
            {
                "slots": slots,
                "predicted": predicted,
                "measured": values,
                "mean": mean,
                "error": error,
                "per_slot": mean / slots,
                "scaling": mean / slots / one_slot,
                "source": source,
            }
        )
        print(
            f"{slots:>5} {predicted:>10,.0f} {mean:>13,.0f} {100 * error:>+6.1f}% {mean / slots:>9,.0f} "
            f"{mean / slots / one_slot:>8.3f}  {source} ({', '.join(f'{v:,.0f}' for v in values)})"
        )
    saturated = [p for p in meter.phases if p["slots"] == max(checks) and p["rate"] > (p["read"] or 0) * 1.5]
    cores = max((p["cores"] for p in saturated), default=float("nan"))
    print(
        f"JVM CPU while {max(checks)} slots are saturated: {cores:.2f} cores of {os.cpu_count()}; "
        f"load (1 min) {statistics.mean(p['load_1m'] for p in meter.phases):.1f} on average"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "capacity_per_slot": args.capacity_per_slot,
        "skew": args.skew,
        "plan_slots": [low, high],
        "testbed_runs": model.testbed_runs,
        "plan_s": plan_s,
        "cluster_start_s": up_s,
        "surrogate": model.surrogate.to_dict(),
        "validation": model.validation,
        "rows": rows,
        "saturated_cores": cores,
        "phases": meter.phases,
        "runs": [{"index": r.index, "slots": r.task_slots, "mst": r.mst, "purpose": r.purpose} for r in runs],
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(rows, model, args.out / "streambed_flink.png", low, high)
    print(f"summary: {args.out / 'summary.json'}\nplot:    {args.out / 'streambed_flink.png'}")


def plot(rows: list[dict[str, Any]], model: Any, path: Path, low: int, high: int) -> None:
    """Measured MSTs per scale-out and the surrogate's line, the explored range shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    top = max(r["slots"] for r in rows)
    xs = [1 + i * (top - 1) / 100 for i in range(101)]
    ax.plot(
        xs, [model.surrogate.capacity_at(x, model.memory_mb) for x in xs], label=f"StreamBed ({model.surrogate.family})"
    )
    for row in rows:
        ax.scatter(
            [row["slots"]] * len(row["measured"]),
            row["measured"],
            color="black" if row["source"] == "measured" else "tab:orange",
            zorder=3,
            s=18,
        )
    ax.scatter([], [], color="tab:orange", s=18, label="plan runs (MST)")
    ax.scatter([], [], color="black", s=18, label="measured MST")
    ax.axvspan(low - 0.1, high + 0.1, color="tab:orange", alpha=0.1, label="explored")
    ax.set_xlabel("task slots (one-slot TaskManagers)")
    ax.set_ylabel("max sustainable throughput, records/s")
    ax.set_title("StreamBed on real Flink: trace job")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()

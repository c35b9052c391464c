"""In-place rescale downtimes of a real Flink 2.3 job (adaptive scheduler, REST resource requirements).

Starts a loopback session cluster (three one-slot TaskManagers, checkpoints every 5 s), submits the
datagen -> calc -> aggregate -> blackhole job, and rescales it through the flink-rest scaler in a fixed
cycle, several rounds. Per rescale it prints the downtime measured from the job's own timestamps (new
execution graph created -> last subtask RUNNING), the wall time from the PUT to the confirmed
read-back (includes the scheduler's stabilization wait), and the simulator's model for the same
rescale (rescale_downtime_base_s + rescale_downtime_per_worker_s x the larger scale-out). Rescales are
aligned with a checkpoint as the scaler's defaults do (``--plain``: not); what that buys is measured by
benchmarks/bench_rescale_replay.py.

Run: .venv/bin/python -m benchmarks.bench_flink_rescale [--rounds 3] [--settle 8] [--flink-defaults] [--plain]
(needs scripts/install-flink.sh; about two minutes).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from agent.execute.flink_rest import FlinkRestScaler
from agent.logging import configure_logging
from agent.settings import ScaleTargetSettings
from simulator.config import SimulatorSettings
from tests.fixtures.flink import FlinkCluster

CYCLE = ((1, 2), (2, 3), (3, 2), (2, 1), (1, 3), (3, 1))
"""(from, to) pairs: every step up and down between one and three workers."""

DEFAULT_TIMINGS = {
    key: None
    for key in (
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling",
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout",
        "jobmanager.adaptive-scheduler.resource-stabilization-timeout",
        "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout",
        "jobmanager.adaptive-scheduler.rescale-trigger.max-delay",
    )
}


def main() -> None:
    """Run the rescale cycle and print one row per rescale and a summary per direction."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=8.0, help="seconds the job runs between rescales")
    parser.add_argument("--rate", type=int, default=20000, help="rows per second of the datagen source")
    parser.add_argument(
        "--flink-defaults",
        action="store_true",
        help="keep Flink's adaptive-scheduler timings (cooldown, stabilization) instead of the test cluster's 0-1 s",
    )
    parser.add_argument("--plain", action="store_true", help="rescale without a checkpoint triggered for it")
    args = parser.parse_args()
    configure_logging("console", "error")
    model = SimulatorSettings()
    rows: list[tuple[int, int, float | None, float]] = []
    with tempfile.TemporaryDirectory(prefix="perdix-bench-flink-") as workdir:
        cluster = FlinkCluster(Path(workdir), extra_config=DEFAULT_TIMINGS if args.flink_defaults else {})
        try:
            started = time.monotonic()
            cluster.start()
            job_id = cluster.submit(name="perdix-bench", parallelism=1, rows_per_second=args.rate)
            print(
                f"cluster up and job running in {time.monotonic() - started:.1f} s ({cluster.rest_url}, job {job_id})"
            )
            scaler = FlinkRestScaler(
                ScaleTargetSettings(
                    kind="flink-rest", rest_url=cluster.rest_url, job=job_id, checkpoint_before_rescale=not args.plain
                ),
                confirm_timeout_s=180.0,
                poll_interval_s=0.1,
            )
            print(f"{'from':>4} {'to':>3} {'downtime s':>10} {'PUT->confirmed s':>16} {'simulator model s':>17}")
            for _ in range(args.rounds):
                for source, target in CYCLE:
                    time.sleep(args.settle)  # let the job run and checkpoint at this scale-out (the measured object)
                    assert scaler.current_parallelism() == source
                    begin = time.monotonic()
                    result = scaler.rescale(target, reasons=("benchmark",), dry_run=False)
                    wall = time.monotonic() - begin
                    assert result.confirmed == target, result
                    rows.append((source, target, result.downtime_s, wall))
                    modelled = model.rescale_downtime_base_s + model.rescale_downtime_per_worker_s * max(source, target)
                    downtime = f"{result.downtime_s:.2f}" if result.downtime_s is not None else "n/a"
                    print(f"{source:>4} {target:>3} {downtime:>10} {wall:>16.2f} {modelled:>17.1f}", flush=True)
        finally:
            cluster.stop()

    for label, keep in (("up", lambda s, t: t > s), ("down", lambda s, t: t < s)):
        measured = [d for s, t, d, _ in rows if keep(s, t) and d is not None]
        walls = [w for s, t, _, w in rows if keep(s, t)]
        simulated = [
            model.rescale_downtime_base_s + model.rescale_downtime_per_worker_s * max(s, t)
            for s, t, _, _ in rows
            if keep(s, t)
        ]
        if not measured:
            continue
        print(
            f"{label:>4}: downtime median {statistics.median(measured):.2f} s "
            f"(min {min(measured):.2f}, max {max(measured):.2f}, "
            f"n={len(measured)}); PUT->confirmed median {statistics.median(walls):.2f} s; "
            f"simulator model median {statistics.median(simulated):.1f} s "
            f"(x{statistics.median(simulated) / max(statistics.median(measured), 1e-9):.1f} the measured downtime)"
        )


if __name__ == "__main__":
    main()

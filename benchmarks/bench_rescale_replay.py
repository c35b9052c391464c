"""What aligning a rescale with a checkpoint buys on a real Flink job: replayed records, stop, delay.

A rescale in place restarts the job from its latest completed checkpoint: a source that reads from checkpointed
positions (Kafka, a log) re-reads every record it had read between that checkpoint's barrier and the stop, and
the job processes them again (replayed). Per release (Flink 2.3 and 1.20 LTS), this starts a loopback session
cluster (three one-slot TaskManagers, adaptive scheduler, checkpoints every ``--interval`` s), submits a job at a
fixed ``--rate`` (``--job datagen``: the SQL datagen -> calc -> aggregate -> blackhole job, whose random source
restarts from the same point but re-reads nothing; ``--job trace``: the trace-source log job, whose source re-reads
from its checkpointed offsets and whose sink verifies every offset, its lost and duplicated records printed at the
end), and rescales it 1 -> 2 -> 1 ... through the flink-rest scaler, with ``checkpoint_before_rescale`` off (plain)
and on (aligned) in the order plain, aligned, aligned, plain, ... (each mode as often up as down), each after a
random pause (seeded) so the rescales fall at every phase of the checkpoint cycle. Per rescale, from the job's REST
API:

- replay window: the new execution graph's creation (the old one has just been cancelled: where processing
  stopped) minus the trigger time of the checkpoint the new graph restored (``/jobs/{id}/checkpoints``,
  ``latest.restored``; its barrier enters the sources at that moment). Replayed records = window x rate (what a
  source that keeps up read in that window);
- downtime: new graph created -> last subtask RUNNING (the scaler's measure);
- delay: the decision (the call of ``rescale``) -> the new graph's creation (what waiting for a checkpoint costs).

On 2.x the adaptive scheduler holds a rescale until a checkpoint completes or
``jobmanager.adaptive-scheduler.rescale-trigger.max-delay`` passes (Flink's default: the checkpoint interval times
one more than ``rescale-trigger.max-checkpoint-failures``, 2); ``--max-delay`` sets it (``default``: Flink's).

Run: flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_rescale_replay \\
         [--versions 2.3,1.20] [--pairs 6] [--interval 10] [--rate 5000] [--max-delay default] [--job trace]
(needs scripts/install-flink.sh; about 4 minutes per release at the defaults).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.execute.flink_rest import FlinkRestScaler
from agent.logging import configure_logging
from agent.settings import ScaleTargetSettings
from lab.flink import trace_job
from lab.flink.cluster import flink_major, flink_release, rest_get
from tests.fixtures.flink import FlinkCluster, flink_home


@dataclass(frozen=True)
class Rescale:
    """One measured rescale."""

    mode: str
    """``plain`` or ``aligned``."""
    source: int
    target: int
    replay_s: float | None
    downtime_s: float | None
    delay_s: float | None


def restored_trigger_ms(rest_url: str, job_id: str) -> int | None:
    """Trigger time (Unix ms) of the checkpoint the running execution graph restored, or None."""
    stats = rest_get(f"{rest_url}/jobs/{job_id}/checkpoints") or {}
    restored = (stats.get("latest") or {}).get("restored") or {}
    if "id" not in restored:
        return None
    for entry in stats.get("history") or []:
        if entry.get("id") == restored["id"]:
            return int(entry["trigger_timestamp"])
    details = rest_get(f"{rest_url}/jobs/{job_id}/checkpoints/details/{restored['id']}") or {}
    return int(details["trigger_timestamp"]) if "trigger_timestamp" in details else None


def measure(
    cluster: FlinkCluster, job_id: str, scaler: FlinkRestScaler, mode: str, source: int, target: int
) -> Rescale:
    """Rescale ``source`` -> ``target`` with ``scaler`` and read the replay window, downtime and delay."""
    decided_ms = time.time() * 1000
    result = scaler.rescale(target, reasons=("benchmark",), dry_run=False)
    assert result.confirmed == target, result
    created_ms = int(((cluster.job(job_id) or {}).get("timestamps") or {}).get("CREATED") or 0)
    time.sleep(1.5)  # the checkpoint statistics are cached for a moment after the restart
    trigger_ms = restored_trigger_ms(cluster.rest_url, job_id)
    replay = (created_ms - trigger_ms) / 1000 if trigger_ms and created_ms else None
    delay = (created_ms - decided_ms) / 1000 if created_ms else None
    return Rescale(mode, source, target, replay, result.downtime_s, delay)


def scheduler_config(series: str, max_delay: str) -> dict[str, Any]:
    """The cluster's overrides: Flink's own rescale-trigger delay unless ``max_delay`` names one (2.x only)."""
    if int(series.split(".")[0]) < 2:
        return {}
    key = "jobmanager.adaptive-scheduler.rescale-trigger.max-delay"
    return {key: None if max_delay == "default" else max_delay}


def run_release(series: str, args: argparse.Namespace, rng: random.Random) -> list[Rescale]:
    """Every rescale of one release, printed as it is measured."""
    home = flink_home(flink_release(series))
    rows: list[Rescale] = []
    with tempfile.TemporaryDirectory(prefix="perdix-bench-replay-") as workdir:
        cluster = FlinkCluster(
            Path(workdir),
            home=home,
            checkpoint_interval_s=args.interval,
            extra_config=scheduler_config(series, args.max_delay),
        )
        try:
            cluster.start()
            job_id = submit(cluster, args)
            scalers = {
                mode: FlinkRestScaler(
                    ScaleTargetSettings(
                        kind="flink-rest", rest_url=cluster.rest_url, job=job_id, checkpoint_before_rescale=aligned
                    ),
                    confirm_timeout_s=120.0,
                    poll_interval_s=0.1,
                )
                for mode, aligned in (("plain", False), ("aligned", True))
            }
            print(f"Flink {cluster.version} (major {flink_major(home)}), job {job_id}, rate {args.rate}/s")
            print(
                f"{'mode':>8} {'from':>4} {'to':>3} {'replay s':>8} {'replayed':>9} {'downtime s':>10} {'delay s':>7}"
            )
            parallelism = 1
            for index in range(2 * args.pairs):
                mode = ("plain", "aligned")[(index + 1) // 2 % 2]  # ABBA: each mode rescales up and down alike
                time.sleep(args.settle + rng.uniform(0, args.interval))  # any phase of the checkpoint cycle
                target = 2 if parallelism == 1 else 1
                row = measure(cluster, job_id, scalers[mode], mode, parallelism, target)
                parallelism = target
                rows.append(row)
                print(
                    f"{mode:>8} {row.source:>4} {row.target:>3} {_fmt(row.replay_s):>8} "
                    f"{_fmt(row.replay_s and row.replay_s * args.rate, 0):>9} "
                    f"{_fmt(row.downtime_s):>10} {_fmt(row.delay_s):>7}",
                    flush=True,
                )
            if args.job == "trace":
                time.sleep(3)  # the verifier's gauges of the last attempt
                counts = trace_job.read_counts(cluster.rest_url, job_id)
                print(f"trace job's verifier: {counts.lost} records lost, {counts.duplicates} duplicated")
        finally:
            cluster.stop()
    return rows


def submit(cluster: FlinkCluster, args: argparse.Namespace) -> str:
    """Submit the job ``--job`` names at parallelism 1; its id once every subtask runs."""
    if args.job == "datagen":
        return cluster.submit(name="perdix-bench-replay", parallelism=1, rows_per_second=args.rate)
    options = trace_job.TraceJobOptions(
        job_name="perdix-bench-replay",
        rate_per_s=float(args.rate),
        capacity_per_subtask=0.0,  # no per-record cost: one slot keeps up, so every record is read as produced
        checkpoint_interval_s=float(args.interval),
    )
    return trace_job.submit(cluster.rest_url, options, jar=trace_job.build_jar(home=cluster.home)).job_id


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def summarise(series: str, rows: list[Rescale], rate: int) -> None:
    """Median and range of each figure per mode."""
    for mode in ("plain", "aligned"):
        mine = [r for r in rows if r.mode == mode]
        parts = []
        for label, values in (
            ("replay s", [r.replay_s for r in mine]),
            ("downtime s", [r.downtime_s for r in mine]),
            ("delay s", [r.delay_s for r in mine]),
        ):
            known = [v for v in values if v is not None]
            if known:
                parts.append(
                    f"{label} median {statistics.median(known):.2f} (min {min(known):.2f}, max {max(known):.2f})"
                )
        replays = [r.replay_s for r in mine if r.replay_s is not None]
        records = f"replayed records median {statistics.median(replays) * rate:.0f}" if replays else "no replay read"
        print(f"Flink {series} {mode:>7} (n={len(mine)}): {records}; " + "; ".join(parts))


def main() -> None:
    """Measure every release asked for and print the rescales and a summary per release and mode."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="2.3,1.20", help="Flink series, comma-separated")
    parser.add_argument("--pairs", type=int, default=6, help="rescales per mode")
    parser.add_argument("--interval", type=int, default=10, help="checkpoint interval, seconds")
    parser.add_argument("--rate", type=int, default=5000, help="rows per second of the datagen source")
    parser.add_argument("--settle", type=float, default=4.0, help="least seconds between two rescales")
    parser.add_argument("--max-delay", default="default", help="2.x rescale-trigger.max-delay: default or e.g. '1 s'")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--job",
        choices=("datagen", "trace"),
        default="datagen",
        help="datagen: the SQL datagen -> aggregate job; trace: the trace-source log job, whose source re-reads "
        "from its checkpointed offsets and whose sink verifies every offset (lost, duplicated)",
    )
    args = parser.parse_args()
    configure_logging("console", "warning")
    rng = random.Random(args.seed)
    results = {series: run_release(series, args, rng) for series in args.versions.split(",")}
    for series, rows in results.items():
        summarise(series, rows, args.rate)


if __name__ == "__main__":
    main()

"""Whether Perdix's capacity estimate holds still on a real Flink job whose load does not change.

A loopback cluster of three one-slot TaskManagers, a real Prometheus scraping every ``--scrape``, a
datagen job at a steady ``--rate`` on all three slots, and ``perdix run --dry-run`` with every shipped
default (the flink-rest target's 30-s loop, 60-s rates, Daedalus). The job is ``--job sql``, the PyFlink
datagen -> calc -> keyed aggregate -> blackhole job of tests/flink/job.py (light: 20,000/s keeps its
slots about 1 % busy), or ``--job generator``, Flink's datagen source into a map that costs
``--capacity`` records/s per slot (lab/flink/trace_job.py ``submit_generator``), so the load sits where
a scale-in's decision turns on the capacity read. Nothing changes for ``--minutes``: the job is never rescaled, its
rate is fixed. Each round's capacity at the current scale-out (the ``capacity`` of the ``loop`` log
event) and the decision it would take (``target``) are printed; the summary gives, per run, the
drift from the first settled round to the last, the rounds' spread, the spread of their second half
(the first minutes read a job still starting: rate windows reaching back to it, a JVM warming up) and its
largest change from one round to the next, and across runs how far their final readings lie apart.

An estimate that converges reads the same at every settled round and in every run; one that drifts
makes a scale-in depend on when its stabilization window ends.

Run (about ``--minutes`` + 1 per run):
    flock /tmp/perdix-flink.lock .venv/bin/python -m benchmarks.bench_real_flink_steady [--runs 2] [--minutes 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.logging import configure_logging
from lab.flink.agent_process import PerdixProcess
from lab.flink.harness import agent_settings
from lab.flink.prometheus import PrometheusServer
from lab.flink.trace_job import build_jar, submit_generator
from tests.fixtures.flink import FlinkCluster

TASKMANAGERS = 3


def run_once(
    workdir: Path,
    *,
    job: str,
    rate: int,
    capacity: float,
    minutes: float,
    scrape: str,
    settle_rounds: int,
    keep: Path | None = None,
) -> list[dict[str, Any]]:
    """One cluster, one job at ``rate``, one dry-run agent for ``minutes``; every ``loop`` event it logged (and,
    with ``keep``, written there with the agent's knowledge document)."""
    cluster = FlinkCluster(workdir / "flink", taskmanagers=TASKMANAGERS)
    prometheus: PrometheusServer | None = None
    agent: PerdixProcess | None = None
    try:
        (workdir / "flink").mkdir(parents=True, exist_ok=True)
        cluster.start()
        prometheus = PrometheusServer(workdir / "prometheus", cluster.metrics_targets, scrape_interval=scrape).start()
        prometheus.wait_for(f"count(up == 1) == {len(cluster.metrics_targets)}", timeout_s=60.0)
        name = "perdix-steady"
        if job == "sql":
            cluster.submit(name=name, parallelism=TASKMANAGERS, rows_per_second=rate)
        else:
            job_id = submit_generator(
                cluster.rest_url,
                job_name=name,
                rate_per_s=rate,
                capacity_per_subtask=capacity,
                parallelism=TASKMANAGERS,
                jar=build_jar(),
            )
            cluster.jobs.append(job_id)
        settings = agent_settings(
            prometheus_url=prometheus.url,
            rest_url=cluster.rest_url,
            job_name=name,
            knowledge_path=workdir / "knowledge.json",
            max_parallelism=TASKMANAGERS,
        )
        agent = PerdixProcess(workdir / "agent", settings, dry_run=True).start()
        end = time.time() + minutes * 60.0
        shown = 0
        while time.time() < end:
            time.sleep(5.0)
            cluster.check_alive()
            agent.check_alive()
            rounds = agent.events("loop")
            for index, event in enumerate(rounds[shown:], start=shown):
                mark = " " if index >= settle_rounds else "*"
                print(
                    f"  {mark} round {index:3d}: parallelism {event.get('parallelism')}, capacity "
                    f"{_fmt(event.get('capacity'))}/s, workload {_fmt(event.get('workload_avg'))}/s, "
                    f"target {event.get('target')} ({event.get('code')})",
                    flush=True,
                )
            shown = len(rounds)
        events = agent.events("loop")
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "loop-events.json").write_text(json.dumps(events, indent=1))
            knowledge = workdir / "knowledge.json"
            if knowledge.exists():
                shutil.copy(knowledge, keep / "knowledge.json")
        return events
    finally:
        if agent is not None:
            agent.stop()
        if prometheus is not None:
            prometheus.stop()
        cluster.stop()


def _spread(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}–{high:,.0f} ({(high - low) / statistics.median(values):.1%})"


def _fmt(value: object) -> str:
    return f"{float(value):,.0f}" if isinstance(value, int | float) else "—"


def main() -> None:
    """Run the steady job ``--runs`` times and print each run's capacity readings and their spread."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="independent runs, each on a fresh cluster")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the agent watches each run")
    parser.add_argument("--job", choices=("sql", "generator"), default="sql", help="which datagen job (see above)")
    parser.add_argument("--rate", type=int, default=20000, help="rows per second of the datagen source")
    parser.add_argument(
        "--capacity", type=float, default=25000.0, help="records/s one slot of the generator job's map carries"
    )
    parser.add_argument("--scrape", default="15s", help="Prometheus scrape interval (its own default is 15 s)")
    parser.add_argument(
        "--settle-rounds",
        type=int,
        default=3,
        help="rounds left out of the spread (marked *): their rate windows reach back to the job's start",
    )
    parser.add_argument("--keep", type=Path, help="write each run's loop events and knowledge document to DIR/run-N")
    args = parser.parse_args()
    if args.runs < 1 or args.minutes <= 0 or args.rate <= 0 or args.capacity <= 0 or args.settle_rounds < 0:
        parser.error("--runs >= 1, --minutes > 0, --rate > 0, --capacity > 0, --settle-rounds >= 0")
    configure_logging("console", "error")
    finals: list[float] = []
    rows: list[str] = []
    for run in range(1, args.runs + 1):
        what = "" if args.job == "sql" else f" (each slot carries {args.capacity:,.0f}/s)"
        print(f"run {run}: {args.job} job at {args.rate:,}/s on {TASKMANAGERS} slots{what} for {args.minutes:g} min")
        with tempfile.TemporaryDirectory(prefix="perdix-bench-steady-") as tmp:
            events = run_once(
                Path(tmp),
                job=args.job,
                rate=args.rate,
                capacity=args.capacity,
                minutes=args.minutes,
                scrape=args.scrape,
                settle_rounds=args.settle_rounds,
                keep=None if args.keep is None else args.keep / f"run-{run}",
            )
        settled = [
            float(e["capacity"])
            for e in events[args.settle_rounds :]
            if isinstance(e.get("capacity"), int | float) and e.get("parallelism") == TASKMANAGERS
        ]
        targets = sorted({int(e["target"]) for e in events[args.settle_rounds :] if e.get("target") is not None})
        if not settled:
            rows.append(f"| {run} | 0 | — | — | — | — | — | — | {targets} |")
            continue
        first, last = settled[0], settled[-1]
        later = settled[len(settled) // 2 :]
        step = max((abs(b - a) / a for a, b in zip(later, later[1:])), default=0.0)
        finals.append(last)
        rows.append(
            f"| {run} | {len(settled)} | {first:,.0f} | {last:,.0f} | {(last - first) / first:+.1%} | "
            f"{_spread(settled)} | {_spread(later)} | {step:.1%} | {targets} |"
        )
    print(
        "\n| run | settled rounds | first | last | drift | range (of the median) | second half's range | second half's "
        "largest step | targets |\n|---:|---:|---:|---:|---:|---|---|---:|---|"
    )
    print("\n".join(rows))
    if len(finals) > 1:
        spread = (max(finals) - min(finals)) / statistics.median(finals)
        print(f"\nlast readings across runs: {', '.join(f'{v:,.0f}' for v in finals)}/s, {spread:.1%} apart")


if __name__ == "__main__":
    main()

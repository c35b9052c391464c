"""The policy lab: every trace under every policy on identical simulator seeds, side by side.

Each (trace, policy) pair is one replay of the simulated job (``lab.replay``) with the same
simulator seed and the same failure schedule, so the only difference between two rows is the
policy. Pairs run in parallel processes. The oracle (true future, true capacity, true recovery) is
the lower bound: every row carries its worker-hours relative to the oracle's and the share of the
static policy's waste it saved. Policies that decide per operator and resource provision (Justin,
QEScalor) do not apply to the single-vertex job and are reported as n/a with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab.settings import LabSettings
from planner import DAG_ONLY_POLICIES, POLICIES

SERIES_STEP_S = 10
"""Resolution of the per-second series kept for the plots (a 6 h run stays small to ship between processes)."""


class EvaluateError(ValueError):
    """An evaluation that cannot run; the message is the one line the CLI prints."""


@dataclass(frozen=True)
class Pair:
    """One replay of the lab: a trace under a policy."""

    trace_path: Path
    trace_name: str
    policy: str


@dataclass(frozen=True)
class PairResult:
    """The summary and the thinned series of one replay."""

    trace_name: str
    policy: str
    summary: dict[str, Any]
    series: dict[str, np.ndarray]


def parse_policies(text: str) -> list[str]:
    """Comma-separated policy names, validated; raises EvaluateError naming the unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise EvaluateError("--policies: no policy named")
    known = set(POLICIES) | set(DAG_ONLY_POLICIES)
    for name in names:
        if name not in known:
            raise EvaluateError(f"--policies: unknown policy {name!r}; known: {', '.join(sorted(known))}")
    if len(set(names)) != len(names):
        raise EvaluateError(f"--policies: a policy is named twice in {text!r}")
    return names


def plan_pairs(traces: Sequence[Path], policies: Sequence[str]) -> list[Pair]:
    """Every runnable (trace, policy) pair; raises EvaluateError on duplicate trace names."""
    names: dict[str, Path] = {}
    for path in traces:
        if path.stem in names:
            raise EvaluateError(f"--trace: {path} and {names[path.stem]} have the same name {path.stem!r}")
        names[path.stem] = path
    return [Pair(path, path.stem, policy) for path in traces for policy in policies if policy in POLICIES]


def run_pair(
    pair: Pair,
    settings: LabSettings,
    *,
    hours: float | None,
    failures_per_hour: float,
    progress: Callable[[int, int], None] | None = None,
) -> PairResult:
    """Replay one trace under one policy (in whatever process calls it)."""
    from lab.replay import replay
    from simulator import load_trace

    trace = load_trace(pair.trace_path)
    run_settings = settings.model_copy(update={"policy": pair.policy})
    result = replay(trace, run_settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)
    series = result.series
    keep = slice(None, None, SERIES_STEP_S)
    thinned = {name: np.asarray(series[name][keep]) for name in ("time_s", "workload", "parallelism", "lag")}
    return PairResult(pair.trace_name, pair.policy, result.summary, thinned)


def _worker_run(
    pair: Pair, settings: LabSettings, hours: float | None, failures_per_hour: float, queue: Any
) -> PairResult:
    """Process-pool entry: quiet logs, progress through ``queue``."""
    from agent.logging import configure_logging

    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    key = (pair.trace_name, pair.policy)

    def progress(done_s: int, total_s: int) -> None:
        # Every 10 simulated minutes is plenty for a progress bar and keeps the queue quiet.
        if done_s % 600 == 0 or done_s >= total_s:
            queue.put((key, done_s, total_s))

    return run_pair(pair, settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)


def run_pairs(
    pairs: Sequence[Pair],
    settings: LabSettings,
    *,
    hours: float | None,
    failures_per_hour: float,
    jobs: int,
    on_progress: Callable[[tuple[str, str], int, int], None] | None = None,
) -> list[PairResult]:
    """Run every pair, ``jobs`` at a time in separate processes (1: in this process), in pair order."""
    if jobs <= 1 or len(pairs) <= 1:
        results = []
        for pair in pairs:
            key = (pair.trace_name, pair.policy)
            callback = (lambda d, t, key=key: on_progress(key, d, t)) if on_progress else None
            results.append(run_pair(pair, settings, hours=hours, failures_per_hour=failures_per_hour, progress=callback))
        return results
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        queue = manager.Queue()
        futures: dict[Future[PairResult], int] = {
            pool.submit(_worker_run, pair, settings, hours, failures_per_hour, queue): i for i, pair in enumerate(pairs)
        }
        done: dict[int, PairResult] = {}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            while not queue.empty():
                key, done_s, total_s = queue.get()
                if on_progress is not None:
                    on_progress(key, done_s, total_s)
            for future in finished:
                result = future.result()
                done[futures[future]] = result
                if on_progress is not None:
                    total = int(result.summary["duration_s"])
                    on_progress((result.trace_name, result.policy), total, total)
        return [done[i] for i in range(len(pairs))]


DAG_POLICIES = ("ds2", "justin")
"""Per-operator policies the DAG lab runs (QEScalor's mixed provisions cannot be deployed on the testbed)."""


def dag_lab(trace_path: Path, *, hours: float | None, steps: int = 6) -> dict[str, Any]:
    """DS2 and Justin on the operator-DAG testbed at the trace's median and peak rate (see ``lab.dag``)."""
    from lab.dag import run_dag_policy
    from simulator import load_trace
    from simulator.dag import DagTestbed

    trace = load_trace(trace_path)
    duration = int(trace.duration_s if hours is None else min(hours * 3600, trace.duration_s))
    rates = trace.per_second(0, max(duration, 1))
    testbed = DagTestbed()
    out: dict[str, Any] = {}
    for label, rate in (("median", float(np.median(rates))), ("peak", float(np.max(rates)))):
        rows: dict[str, Any] = {"rate": round(rate, 1)}
        for policy in DAG_POLICIES:
            history = run_dag_policy(testbed, policy, rate=rate, initial=(1,) * len(testbed.operator_names), steps=steps)
            first = next((i for i, step in enumerate(history) if step.sustains), None)
            final = history[-1]
            rows[policy] = {
                "parallelism": dict(zip(testbed.operator_names, final.parallelism)),
                "slot_memory_mb": final.memory_mb,
                "sustains": final.sustains,
                "task_slots": final.task_slots,
                "managed_memory_mb": final.managed_memory_mb,
                "cache_hit_rate": None if final.cache_hit_rate is None else round(final.cache_hit_rate, 3),
                "first_sustaining_step": first,
                "configurations_after_sustaining": (
                    len({(s.parallelism, s.memory_mb) for s in history[first:]}) if first is not None else None
                ),
            }
        out[label] = rows
    return out


def default_jobs() -> int:
    """Processes to use: the CPUs this process may run on, at most 2 (the shared machine's budget)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count() or 1
    return max(1, min(2, available))


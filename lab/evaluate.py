"""The policy lab: every trace under every policy on identical simulator seeds, side by side.

Each run is one replay of the simulated job (``lab.replay``) under one policy, at one setting of
its main knob, with the same simulator seed and the same failure instants as every other run of
that trace: arrivals, worker capacities and downtimes do not depend on the policy
(``simulator.JobEnvironment``), so the only difference between two rows is the policy. Each policy
decides at its own sync period (the peers' real ones: 15 s for the Flink autoscaler, the HPA and
KEDA, 10 s for DS2; the agent's loop for Daedalus). ``optimal`` is the offline schedule with full
knowledge (``lab.optimal``), the lower bound every row is measured against. Runs go to parallel
processes.

A sweep runs each policy over its main knob (Daedalus: its target recovery time; the Flink
autoscaler: target utilization; HPA: target CPU; KEDA: lagThreshold; DS2: target ratio); every run
is judged against the lab's one target recovery time, so the points of a policy form its cost
against SLO-misses front.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab.settings import LabSettings
from planner import registry

SERIES_STEP_S = 10
"""Resolution of the per-second series kept for the plots (a 6 h run stays small to ship between processes)."""

OPTIMAL = "optimal"
"""The offline schedule with full knowledge (``lab.optimal``): a lab policy of its own."""

DEFAULT_POLICIES = ("daedalus", "flink-autoscaler", "hpa", "keda-lag", "ds2", "static", OPTIMAL)

SWEEPS: dict[str, tuple[float, ...]] = {
    "daedalus": (150.0, 225.0, 300.0, 450.0, 600.0),
    "flink-autoscaler": (0.5, 0.6, 0.7, 0.8, 0.9),
    "hpa": (0.5, 0.6, 0.7, 0.8, 0.9),
    "keda-lag": (10_000.0, 25_000.0, 50_000.0, 100_000.0, 200_000.0),
    "ds2": (1.0, 1.1, 1.2, 1.35, 1.5),
}
"""Each policy's main knob over a sweep (Daedalus's is the target recovery time it plans with, seconds)."""


class EvaluateError(ValueError):
    """An evaluation that cannot run; the message is the one line the CLI prints."""


@dataclass(frozen=True)
class TraceRef:
    """A trace to replay, with its corpus family and half when it comes from the corpus."""

    path: Path
    name: str
    family: str | None = None
    half: str | None = None


@dataclass(frozen=True)
class Run:
    """One replay of the lab: a trace under a policy at one setting of its knob (None: the default)."""

    trace: TraceRef
    policy: str
    knob: float | None = None

    @property
    def label(self) -> str:
        """``policy`` or ``policy@knob``."""
        return self.policy if self.knob is None else f"{self.policy}@{self.knob:g}"

    @property
    def key(self) -> tuple[str, str]:
        """(trace name, label): what a result is filed under."""
        return (self.trace.name, self.label)


@dataclass(frozen=True)
class RunResult:
    """The summary and the thinned series of one replay."""

    run: Run
    summary: dict[str, Any]
    series: dict[str, np.ndarray]

    @property
    def trace_name(self) -> str:
        """The trace's name."""
        return self.run.trace.name

    @property
    def policy(self) -> str:
        """The run's label (policy, or policy@knob in a sweep)."""
        return self.run.label


def parse_policies(text: str) -> list[str]:
    """Comma-separated policy names, validated; raises EvaluateError naming the unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise EvaluateError("--policies: no policy named")
    known = set(registry.SPECS) | {OPTIMAL}
    for name in names:
        if name not in known:
            raise EvaluateError(f"--policies: unknown policy {name!r}; known: {', '.join(sorted(known))}")
    if len(set(names)) != len(names):
        raise EvaluateError(f"--policies: a policy is named twice in {text!r}")
    return names


def trace_refs(paths: Sequence[Path]) -> list[TraceRef]:
    """Traces given by path; raises EvaluateError on duplicate names."""
    names: dict[str, Path] = {}
    for path in paths:
        if path.stem in names:
            raise EvaluateError(f"--trace: {path} and {names[path.stem]} have the same name {path.stem!r}")
        names[path.stem] = path
    return [TraceRef(path, path.stem) for path in paths]


def corpus_refs(half: str) -> list[TraceRef]:
    """The corpus traces of one half (``dev``, ``held-out``) or ``all``; EvaluateError on a bad index."""
    from lab.corpus import CorpusError, select

    if half not in ("dev", "held-out", "all"):
        raise EvaluateError(f"--corpus: {half!r} is not one of dev, held-out, all")
    try:
        traces = select(half)  # type: ignore[arg-type]
    except CorpusError as exc:
        raise EvaluateError(str(exc)) from None
    return [TraceRef(t.path, t.name, t.family, t.half) for t in traces]


def plan_runs(
    traces: Sequence[TraceRef], policies: Sequence[str], *, sweep: bool = False, swept: Collection[str] | None = None
) -> list[Run]:
    """Every runnable (trace, policy, knob); with ``sweep`` each swept policy at every knob of :data:`SWEEPS`
    (``swept``: only these of them, e.g. the peers alone for the front verdicts).

    The default setting of every policy is always run (a sweep adds the other knobs), so a sweep's
    report still compares the policies as they ship.
    """
    runs: list[Run] = []
    for trace in traces:
        for policy in policies:
            if policy in registry.vertex_only():
                continue
            runs.append(Run(trace, policy))
            if sweep and policy in SWEEPS and (swept is None or policy in swept):
                runs.extend(Run(trace, policy, knob) for knob in SWEEPS[policy])
    return runs


def run_one(
    run: Run,
    settings: LabSettings,
    *,
    hours: float | None,
    failures_per_hour: float,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Replay one trace under one policy setting (in whatever process calls it); its summary's
    ``cpu_s`` is the CPU time the run took."""
    started = time.process_time()
    result = _replay_one(run, settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)
    result.summary["cpu_s"] = round(time.process_time() - started, 2)
    return result


def _replay_one(
    run: Run,
    settings: LabSettings,
    *,
    hours: float | None,
    failures_per_hour: float,
    progress: Callable[[int, int], None] | None,
) -> RunResult:
    from simulator import load_trace

    trace = load_trace(run.trace.path)
    if run.policy == OPTIMAL:
        from lab.optimal import optimal_run

        summary, series = optimal_run(trace, settings, hours=hours, failures_per_hour=failures_per_hour)
        return RunResult(run, summary, _thinned(series))
    from lab.replay import Replay

    spec = registry.spec(run.policy)
    policy = spec.policy(knob=run.knob)
    update: dict[str, Any] = {"policy": run.policy}
    if policy.sync_interval_s is not None:
        update["loop_interval_s"] = policy.sync_interval_s
    if spec.knob_setting is not None and run.knob is not None:
        update[spec.knob_setting] = run.knob  # what it plans with; the SLO stays the lab's
    run_settings = settings.model_copy(update=update)
    replay = Replay(
        trace,
        run_settings,
        hours=hours,
        failures_per_hour=failures_per_hour,
        policy=policy,
        judged_target_s=settings.target_recovery_time_s,
    )
    replay.run(progress=progress)
    result = replay.result()
    summary = {
        **result.summary,
        "policy": run.policy,
        "knob": run.knob,
        "sync_interval_s": run_settings.loop_interval_s,
    }
    return RunResult(run, summary, _thinned(result.series))


def _thinned(series: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = slice(None, None, SERIES_STEP_S)
    return {name: np.asarray(series[name][keep]) for name in ("time_s", "workload", "parallelism", "lag")}


def _worker_run(
    run: Run, settings: LabSettings, hours: float | None, failures_per_hour: float, queue: Any
) -> RunResult:
    """Process-pool entry: quiet logs, progress through ``queue``."""
    from agent.logging import configure_logging

    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)

    def progress(done_s: int, total_s: int) -> None:
        # Every 10 simulated minutes is plenty for a progress bar and keeps the queue quiet.
        if done_s % 600 == 0 or done_s >= total_s:
            queue.put((run.key, done_s, total_s))

    return run_one(run, settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)


def run_all(
    runs: Sequence[Run],
    settings: LabSettings,
    *,
    hours: float | None,
    failures_per_hour: float,
    jobs: int,
    on_progress: Callable[[tuple[str, str], int, int], None] | None = None,
) -> list[RunResult]:
    """Run every run, ``jobs`` at a time in separate processes (1: in this process), in run order."""
    if jobs <= 1 or len(runs) <= 1:
        results = []
        for run in runs:
            callback = (lambda d, t, key=run.key: on_progress(key, d, t)) if on_progress else None
            results.append(run_one(run, settings, hours=hours, failures_per_hour=failures_per_hour, progress=callback))
        return results
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    # The longest runs first (the optimal schedule, then the policies that sync every 15 s), so the
    # pool does not end on one long straggler.
    order = sorted(range(len(runs)), key=lambda i: (runs[i].policy != OPTIMAL, runs[i].policy == "static"))
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        queue = manager.Queue()
        futures: dict[Future[RunResult], int] = {
            pool.submit(_worker_run, runs[i], settings, hours, failures_per_hour, queue): i for i in order
        }
        done: dict[int, RunResult] = {}
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
                    on_progress(result.run.key, total, total)
        return [done[i] for i in range(len(runs))]


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
            history = run_dag_policy(
                testbed, policy, rate=rate, initial=(1,) * len(testbed.operator_names), steps=steps
            )
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


DAG_REPLAY_TRIGGERS = frozenset(registry.vertex_only())
"""Naming any of these in ``--policies`` adds the testbed replay (``lab.dag_replay``) to the evaluation."""


def dag_replay_policies(names: Sequence[str]) -> list[str]:
    """The testbed replay's policies for ``--policies``: the per-operator ones named, DS2 if named, and whole-job
    Daedalus as the baseline they are measured against."""
    from lab.dag_replay import DAG_REPLAY_POLICIES

    if not DAG_REPLAY_TRIGGERS & set(names):
        return []
    return [p for p in DAG_REPLAY_POLICIES if p == "daedalus" or p in names]


def _dag_replay_trace(path: Path, policies: Sequence[str], settings: Any) -> dict[str, Any]:
    """Process-pool entry: one trace's testbed replays, by policy."""
    from lab.dag_replay import replay_all
    from simulator import load_trace

    return {r.policy: r.summary for r in replay_all(load_trace(path), policies, settings)}


def dag_replay_lab(
    traces: Sequence[Path],
    policies: Sequence[str],
    *,
    hours: float | None,
    failures_per_hour: float,
    seed: int,
    target_recovery_time_s: float,
    jobs: int = 1,
    on_trace: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The per-operator policies and whole-job Daedalus replayed over each trace on the testbed (``lab.dag_replay``)."""
    from lab.dag_replay import DagReplaySettings

    settings = DagReplaySettings(
        hours=hours,
        failures_per_hour=failures_per_hour,
        seed=seed,
        target_recovery_time_s=target_recovery_time_s,
    )
    out: dict[str, Any] = {}
    if jobs <= 1 or len(traces) <= 1:
        for path in traces:
            out[path.stem] = _dag_replay_trace(path, policies, settings)
            if on_trace is not None:
                on_trace(path.stem)
        return out
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_dag_replay_trace, path, policies, settings): path for path in traces}
        for future in futures:
            out[futures[future].stem] = future.result()
            if on_trace is not None:
                on_trace(futures[future].stem)
    return {path.stem: out[path.stem] for path in traces}


def default_jobs() -> int:
    """Processes to use: the CPUs this process may run on, at most 2 (the shared machine's budget)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count() or 1
    return max(1, min(2, available))


def below_front(point: tuple[float, int], others: Sequence[tuple[float, int]]) -> bool:
    """True if ``point`` (worker-hours, misses) uses fewer worker-hours than every one of ``others`` that has
    no more misses: no setting of that policy is at least as good on both counts.

    >>> below_front((50.0, 0), [(60.0, 0), (40.0, 3)])
    True
    >>> below_front((50.0, 1), [(48.0, 1)])
    False
    """
    hours, misses = point
    return all(hours < other_hours for other_hours, other_misses in others if other_misses <= misses)


def pareto(points: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """The non-dominated points (worker-hours, misses), by worker-hours."""
    kept = [p for p in points if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in points)]
    return sorted(set(kept))


def finite(value: float | None) -> float | None:
    """None for missing or non-finite values (JSON has no NaN)."""
    return value if value is not None and math.isfinite(value) else None

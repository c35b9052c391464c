"""The policy lab: every trace under every policy on identical simulator seeds, side by side.

Each (trace, policy) pair is one replay of the simulated job (``agent.replay``) with the same
simulator seed and the same failure schedule, so the only difference between two rows is the
policy. Pairs run in parallel processes. The oracle (true future, true capacity, true recovery) is
the lower bound: every row carries its worker-hours relative to the oracle's and the share of the
static policy's waste it saved. Policies that decide per operator and resource provision (Justin,
QEScalor) do not apply to the single-vertex job and are reported as n/a with the reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.settings import Settings
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
    settings: Settings,
    *,
    hours: float | None,
    failures_per_hour: float,
    progress: Callable[[int, int], None] | None = None,
) -> PairResult:
    """Replay one trace under one policy (in whatever process calls it)."""
    from agent.replay import replay
    from simulator import load_trace

    trace = load_trace(pair.trace_path)
    run_settings = settings.model_copy(update={"policy": pair.policy})
    result = replay(trace, run_settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)
    series = result.series
    keep = slice(None, None, SERIES_STEP_S)
    thinned = {name: np.asarray(series[name][keep]) for name in ("time_s", "workload", "parallelism", "lag")}
    return PairResult(pair.trace_name, pair.policy, result.summary, thinned)


def _worker_run(
    pair: Pair, settings: Settings, hours: float | None, failures_per_hour: float, queue: Any
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
    settings: Settings,
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
    """DS2 and Justin on the operator-DAG testbed at the trace's median and peak rate (see ``agent.dag_lab``)."""
    from agent.dag_lab import run_dag_policy
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


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return round(value / reference, 4)


def savings_captured(static: float, policy: float, oracle: float) -> float | None:
    """(static - policy) / (static - oracle): the share of what could be saved that the policy saved."""
    if static - oracle <= 1e-9:
        return None
    return round((static - policy) / (static - oracle), 4)


def build_summary(results: Sequence[PairResult], traces: Sequence[str], policies: Sequence[str]) -> dict[str, Any]:
    """``{"traces": {TRACE: {POLICY: {...summary..., "worker_hours_vs_oracle": x}}}}`` (n/a rows say why)."""
    by_key = {(r.trace_name, r.policy): r.summary for r in results}
    out: dict[str, Any] = {}
    for trace in traces:
        rows: dict[str, Any] = {}
        oracle = by_key.get((trace, "oracle"))
        static = by_key.get((trace, "static"))
        for policy in policies:
            if policy in DAG_ONLY_POLICIES:
                where = " (its DAG-testbed run is under dag_testbed)" if policy in DAG_POLICIES else ""
                rows[policy] = {
                    "status": "n/a",
                    "reason": f"operator-DAG testbed only: {DAG_ONLY_POLICIES[policy]}{where}",
                }
                continue
            summary = dict(by_key[(trace, policy)])
            hours = summary["worker_hours"]
            summary["worker_hours_vs_oracle"] = _ratio(hours, oracle["worker_hours"] if oracle else None)
            summary["savings_captured"] = (
                savings_captured(static["worker_hours"], hours, oracle["worker_hours"]) if oracle and static else None
            )
            rows[policy] = summary
        out[trace] = rows
    return {"traces": out}


def goal_checks(rows: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """The issue's goal figures for Daedalus on one trace: (goal, met or None if not measurable, figure)."""
    daedalus = rows.get("daedalus")
    if not daedalus or daedalus.get("status") == "n/a":
        return []
    checks: list[tuple[str, bool | None, str]] = []
    ratio = daedalus.get("worker_hours_vs_oracle")
    checks.append(("worker-hours <= 1.10 x oracle", None if ratio is None else ratio <= 1.10, f"{ratio}"))
    captured = daedalus.get("savings_captured")
    checks.append(("savings captured >= 0.85", None if captured is None else captured >= 0.85, f"{captured}"))
    for rival in ("hpa", "keda-lag", "ds2"):
        other = rows.get(rival)
        if not other or other.get("status") == "n/a":
            continue
        fewer = daedalus["worker_hours"] < other["worker_hours"]
        no_more_misses = daedalus["slo_misses"] <= other["slo_misses"]
        checks.append(
            (
                f"fewer worker-hours than {rival}, no more SLO misses",
                fewer and no_more_misses,
                f"{daedalus['worker_hours']:.2f} vs {other['worker_hours']:.2f} h, "
                f"{daedalus['slo_misses']} vs {other['slo_misses']} misses",
            )
        )
    checks.append(
        (
            "zero SLO misses and zero records lost",
            daedalus["slo_misses"] == 0 and daedalus["records_lost"] == 0,
            f"{daedalus['slo_misses']} misses, {daedalus['records_lost']} lost",
        )
    )
    return checks


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def render_report(summary: dict[str, Any], *, hours: float | None, failures_per_hour: float, seed: int) -> str:
    """``report.md``: one table per trace and the Daedalus goal checks."""
    lines = [
        "# Policy lab",
        "",
        f"Simulated replays on identical seeds (simulator seed {seed}), "
        f"{'whole traces' if hours is None else f'first {hours:g} h of each trace'}, "
        f"{failures_per_hour:g} injected failures per hour. Oracle = true future workload, true capacity and "
        "true recovery: the lower bound. Savings captured = (static − policy) / (static − oracle).",
        "",
    ]
    columns = [
        ("worker-hours", "worker_hours", 2),
        ("× oracle", "worker_hours_vs_oracle", 3),
        ("savings captured", "savings_captured", 3),
        ("rescales", "rescales", 0),
        ("SLO misses", "slo_misses", 0),
        ("recoveries", "recoveries", 0),
        ("max recovery s", "recovery_max_s", 0),
        ("lag over target s", "lag_over_target_s", 0),
        ("max lag", "max_lag_records", 0),
        ("records lost", "records_lost", 0),
    ]
    for trace, rows in summary["traces"].items():
        lines += [f"## {trace}", "", "| policy | " + " | ".join(c[0] for c in columns) + " |"]
        lines.append("|---|" + "---:|" * len(columns))
        for policy, row in rows.items():
            if row.get("status") == "n/a":
                lines.append(f"| {policy} | n/a: {row['reason']} |" + " |" * (len(columns) - 1))
                continue
            lines.append(f"| {policy} | " + " | ".join(_cell(row.get(key), d) for _, key, d in columns) + " |")
        checks = goal_checks(rows)
        if checks:
            lines += ["", "Daedalus goals:", ""]
            for goal, met, figure in checks:
                mark = "n/a" if met is None else ("met" if met else "**missed**")
                lines.append(f"- {goal}: {mark} ({figure})")
        lines.append("")
    dag = summary.get("dag_testbed")
    if dag:
        lines += [
            "## Operator-DAG testbed: DS2 and Justin",
            "",
            "Per-operator policies on the windowed-aggregation query at each trace's median and peak rate, "
            "six policy intervals from one task per operator. QEScalor is not run: the testbed gives every "
            "slot the same CPU and memory, so its mixed provisions cannot be deployed.",
            "",
            "| trace | rate | policy | final parallelism | slot memory MB | task slots | managed memory MB | "
            "cache hit rate | sustains | first sustaining step | configurations after |",
            "|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|",
        ]
        for trace, by_rate in dag.items():
            for label, rows in by_rate.items():
                for policy in DAG_POLICIES:
                    row = rows[policy]
                    shape = "/".join(str(p) for p in row["parallelism"].values())
                    lines.append(
                        f"| {trace} | {label} {rows['rate']:,.0f}/s | {policy} | {shape} | {row['slot_memory_mb']:.0f} | "
                        f"{row['task_slots']} | {row['managed_memory_mb']:.0f} | {_cell(row['cache_hit_rate'], 3)} | "
                        f"{'yes' if row['sustains'] else 'no'} | {_cell(row['first_sustaining_step'])} | "
                        f"{_cell(row['configurations_after_sustaining'])} |"
                    )
        lines.append("")
    return "\n".join(lines)


def plot_trace(trace: str, results: Sequence[PairResult], path: Path) -> None:
    """Workload, parallelism per policy and lag per policy of one trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_par, ax_lag) = plt.subplots(3, 1, figsize=(11, 8), sharex=True, constrained_layout=True)
    fig.suptitle(f"{trace}: parallelism and lag per policy")
    first = results[0].series
    ax_rate.plot(first["time_s"] / 3600, first["workload"] / 1000, lw=0.6, color="tab:blue")
    ax_rate.set_ylabel("workload (k records/s)")
    for result in results:
        hours = result.series["time_s"] / 3600
        label = f"{result.policy} ({result.summary['worker_hours']:.1f} h)"
        ax_par.step(hours, result.series["parallelism"], where="post", lw=0.9, label=label)
        ax_lag.plot(hours, np.maximum(result.series["lag"], 0) / 1000, lw=0.7, label=result.policy)
    ax_par.set_ylabel("workers")
    ax_par.legend(loc="upper left", fontsize=8, ncol=3)
    ax_lag.set_ylabel("lag (k records)")
    ax_lag.set_yscale("symlog", linthresh=1.0)
    ax_lag.set_xlabel("hours")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bars(summary: dict[str, Any], path: Path) -> None:
    """Grouped bars: worker-hours and SLO misses per policy, one group per trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(summary["traces"])
    policies = [p for p in next(iter(summary["traces"].values())) if p in POLICIES] if traces else []
    fig, (ax_hours, ax_miss) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    width = 0.8 / max(1, len(policies))
    x = np.arange(len(traces))
    for i, policy in enumerate(policies):
        hours = [summary["traces"][t][policy]["worker_hours"] for t in traces]
        misses = [summary["traces"][t][policy]["slo_misses"] for t in traces]
        ax_hours.bar(x + i * width, hours, width, label=policy)
        ax_miss.bar(x + i * width, misses, width, label=policy)
    for ax, title in ((ax_hours, "worker-hours"), (ax_miss, "SLO misses")):
        ax.set_xticks(x + width * (len(policies) - 1) / 2, traces)
        ax.set_title(title)
    ax_hours.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(
    results: Sequence[PairResult],
    traces: Sequence[str],
    policies: Sequence[str],
    out_dir: Path,
    *,
    hours: float | None,
    failures_per_hour: float,
    seed: int,
    dag_testbed: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """summary.json, report.md, one PNG per trace and the bar chart; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = build_summary(results, traces, policies)
    if dag_testbed:
        summary["dag_testbed"] = dag_testbed
    paths: dict[str, Path] = {"summary": out_dir / "summary.json", "report": out_dir / "report.md"}
    paths["summary"].write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    paths["report"].write_text(render_report(summary, hours=hours, failures_per_hour=failures_per_hour, seed=seed))
    for trace in traces:
        trace_results = [r for r in results if r.trace_name == trace]
        if trace_results:
            paths[f"plot:{trace}"] = out_dir / f"{trace}.png"
            plot_trace(trace, trace_results, paths[f"plot:{trace}"])
    if results:
        paths["bars"] = out_dir / "worker_hours_slo.png"
        plot_bars(summary, paths["bars"])
    return paths


def default_jobs() -> int:
    """Processes to use: the CPUs this process may run on, at most 2 (the shared machine's budget)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count() or 1
    return max(1, min(2, available))


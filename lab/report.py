"""The lab's reports: summary.json, report.md and the plots of a replay or of an evaluation.

Kept apart from the runners (``lab.replay``, ``lab.evaluate``) so that running and reporting do not
import each other. Every cost is also given as a multiple of the optimal schedule's (``× optimal``)
on the same replay; misses are the SLO misses of ``lab.slo``, judged the same way for every row.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.evaluate import DAG_POLICIES, OPTIMAL, RunResult, below_front, pareto
from lab.plots import plot_fronts, plot_replay, plot_trace
from lab.replay import ReplayResult
from planner import registry

PEERS = ("flink-autoscaler", "hpa", "keda-lag", "ds2")
"""The policies operators run today, whose fronts Daedalus is compared against."""

GOAL_MEDIAN_X_OPTIMAL = 1.10
GOAL_WORST_X_OPTIMAL = 1.20


REPLAY_OUTPUTS = ("summary.json", "replay.png")
"""The files a replay writes in its output directory (and nothing else)."""


def evaluation_outputs(traces: Sequence[str], *, plots: bool, sweep: bool) -> list[str]:
    """The files an evaluation of ``traces`` may write in its output directory (and nothing else)."""
    names = ["summary.json", "report.md"]
    if plots:
        for trace in traces:
            names.append(f"{trace}.png")
            if sweep:
                names.append(f"{trace}.fronts.png")
    return names


def write_replay_outputs(result: ReplayResult, out_dir: Path) -> dict[str, Path]:
    """Write a replay's summary.json and replay.png (REPLAY_OUTPUTS); return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / "summary.json"
    summary_path.write_text(json.dumps(result.summary, indent=2, allow_nan=False) + "\n")
    plot_path = out_dir / "replay.png"
    plot_replay(result, plot_path)
    return {"summary": summary_path, "plot": plot_path}


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return round(value / reference, 4)


def build_summary(results: Sequence[RunResult], policies: Sequence[str]) -> dict[str, Any]:
    """The evaluation as data: every run per trace (with × optimal), each policy over the traces, fronts, verdicts."""
    by_trace: dict[str, dict[str, Any]] = {}
    for result in results:
        trace = result.run.trace
        entry = by_trace.setdefault(trace.name, {"family": trace.family, "half": trace.half, "runs": {}})
        entry["runs"][result.run.label] = dict(result.summary)
    for entry in by_trace.values():
        optimal = entry["runs"].get(OPTIMAL)
        for row in entry["runs"].values():
            row["worker_hours_vs_optimal"] = _ratio(row["worker_hours"], optimal["worker_hours"] if optimal else None)
        for policy in policies:
            if policy in registry.vertex_only():
                where = " (its testbed replay is under dag_replay)"
                entry["runs"][policy] = {
                    "status": "n/a",
                    "reason": f"operator-DAG testbed only: {registry.SPECS[policy].summary}{where}",
                }
    summary: dict[str, Any] = {"traces": by_trace, "policies": _per_policy(by_trace, policies)}
    fronts, verdicts = _fronts(by_trace)
    if fronts:
        summary["fronts"] = fronts
        summary["verdicts"] = verdicts
    return summary


def _runs_at_default(entry: dict[str, Any], policy: str) -> dict[str, Any] | None:
    row = entry["runs"].get(policy)
    return row if row is not None and row.get("status") != "n/a" else None


def _per_policy(by_trace: dict[str, dict[str, Any]], policies: Sequence[str]) -> dict[str, Any]:
    """Each policy at its default over all traces: × optimal median and worst, misses, misses where optimal has none."""
    out: dict[str, Any] = {}
    for policy in policies:
        if policy in registry.vertex_only():
            continue
        ratios, misses, avoidable = [], 0, 0
        for entry in by_trace.values():
            row = _runs_at_default(entry, policy)
            if row is None:
                continue
            if row.get("worker_hours_vs_optimal") is not None:
                ratios.append(row["worker_hours_vs_optimal"])
            misses += row["slo_misses"]
            optimal = entry["runs"].get(OPTIMAL)
            if row["slo_misses"] and optimal is not None and optimal["slo_misses"] == 0:
                avoidable += 1
        out[policy] = {
            "x_optimal_median": round(statistics.median(ratios), 4) if ratios else None,
            "x_optimal_worst": round(max(ratios), 4) if ratios else None,
            "slo_misses": misses,
            "traces_with_misses_optimal_avoids": avoidable,
            "traces": len(ratios),
        }
    return out


def _fronts(by_trace: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per trace and policy the swept points (knob, worker-hours, misses); per trace and peer,
    Daedalus below its front."""
    fronts: dict[str, Any] = {}
    verdicts: dict[str, Any] = {}
    for name, entry in by_trace.items():
        points: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for label, row in entry["runs"].items():
            if row.get("status") == "n/a" or "@" not in label:
                continue
            points[row["policy"]].append(
                {"knob": row["knob"], "worker_hours": row["worker_hours"], "slo_misses": row["slo_misses"]}
            )
        if not points:
            continue
        for policy, swept in points.items():
            default = entry["runs"].get(policy)
            if default is not None:
                swept.append(
                    {"knob": None, "worker_hours": default["worker_hours"], "slo_misses": default["slo_misses"]}
                )
            swept.sort(key=lambda p: (p["worker_hours"], p["slo_misses"]))
        fronts[name] = dict(points)
        daedalus = entry["runs"].get("daedalus")
        if daedalus is None:
            continue
        point = (daedalus["worker_hours"], daedalus["slo_misses"])
        verdicts[name] = {
            peer: below_front(point, [(p["worker_hours"], p["slo_misses"]) for p in points[peer]])
            for peer in PEERS
            if peer in points
        }
    return fronts, verdicts


def goal_checks(summary: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """Daedalus's goals over every trace of the summary: (goal, met or None if not measurable, figure)."""
    per = summary["policies"].get("daedalus")
    if not per:
        return []
    checks: list[tuple[str, bool | None, str]] = []
    median, worst = per["x_optimal_median"], per["x_optimal_worst"]
    checks.append(
        (
            f"worker-hours <= {GOAL_MEDIAN_X_OPTIMAL:.2f} x optimal at the median trace",
            None if median is None else median <= GOAL_MEDIAN_X_OPTIMAL,
            f"{median}",
        )
    )
    checks.append(
        (
            f"worker-hours <= {GOAL_WORST_X_OPTIMAL:.2f} x optimal on the worst trace",
            None if worst is None else worst <= GOAL_WORST_X_OPTIMAL,
            f"{worst}",
        )
    )
    avoidable = per["traces_with_misses_optimal_avoids"]
    checks.append(
        (
            "zero SLO misses on every trace where the optimal schedule has none",
            avoidable == 0,
            f"{avoidable} of {per['traces']} traces",
        )
    )
    verdicts = summary.get("verdicts")
    if verdicts:
        total = sum(len(v) for v in verdicts.values())
        below = sum(sum(1 for ok in v.values() if ok) for v in verdicts.values())
        checks.append(("below every peer's Pareto front on every trace", below == total, f"{below} of {total}"))
    return checks


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


COLUMNS = [
    ("worker-hours", "worker_hours", 2),
    ("× optimal", "worker_hours_vs_optimal", 3),
    ("SLO misses", "slo_misses", 0),
    ("s over target", "slo_seconds_over_target", 0),
    ("longest episode s", "slo_longest_episode_s", 0),
    ("rescales", "rescales", 0),
    ("max lag", "max_lag_records", 0),
    ("records lost", "records_lost", 0),
]


def _trace_table(name: str, entry: dict[str, Any]) -> list[str]:
    lines = [f"### {name}" + (f" ({entry['family']}, {entry['half']})" if entry.get("family") else ""), ""]
    lines.append("| policy | " + " | ".join(c[0] for c in COLUMNS) + " |")
    lines.append("|---|" + "---:|" * len(COLUMNS))
    for label, row in entry["runs"].items():
        if "@" in label:
            continue
        if row.get("status") == "n/a":
            lines.append(f"| {label} | n/a: {row['reason']} |" + " |" * (len(COLUMNS) - 1))
            continue
        lines.append(f"| {label} | " + " | ".join(_cell(row.get(key), d) for _, key, d in COLUMNS) + " |")
    return lines + [""]


def _policy_table(title: str, per: dict[str, Any]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        "| policy | × optimal, median | × optimal, worst | SLO misses | traces with misses the optimal avoids |",
        "|---|---:|---:|---:|---:|",
    ]
    for policy, row in per.items():
        lines.append(
            f"| {policy} | {_cell(row['x_optimal_median'], 3)} | {_cell(row['x_optimal_worst'], 3)} | "
            f"{row['slo_misses']} | {row['traces_with_misses_optimal_avoids']} of {row['traces']} |"
        )
    return lines + [""]


def _rescale_cost_line(cost: dict[str, Any]) -> str:
    """One sentence: what a rescale cost the simulated job in these replays."""
    replay = "no replay (aligned with a checkpoint)" if cost["aligned"] else "the replay since the last checkpoint"
    return (
        f"A rescale cost the simulated job {cost['downtime_base_s']:g} s + {cost['downtime_per_worker_s']:g} s per "
        f"worker of downtime and {replay} (rescale cost `{cost['profile']}`; the agent's downtime prior "
        f"{cost['downtime_prior_s']:g} s)."
    )


def render_report(
    summary: dict[str, Any],
    *,
    hours: float | None,
    failures_per_hour: float,
    seed: int,
    target_recovery_time_s: float,
    rescale_cost: dict[str, Any] | None = None,
) -> str:
    """``report.md``: each policy over the traces, each half and family, each trace, the fronts and the goals."""
    by_trace = summary["traces"]
    lines = [
        "# Policy lab",
        "",
        f"Simulated replays on identical seeds (simulator seed {seed}): the same arrivals, worker capacities, "
        f"downtimes and {failures_per_hour:g} injected TaskManager failures per hour for every policy; "
        f"{'whole traces' if hours is None else f'first {hours:g} h of each trace'}. An SLO miss is an episode "
        f"(from a stop or from falling behind, until the lag is back under one second of input) longer than "
        f"{target_recovery_time_s:.0f} s. Optimal = the offline schedule with full knowledge that first minimises "
        "misses, then worker-hours (`lab/optimal.py`).",
        "",
    ]
    if rescale_cost is not None:
        lines += [_rescale_cost_line(rescale_cost), ""]
    lines += _policy_table("Each policy over all traces", summary["policies"])
    halves = sorted({e["half"] for e in by_trace.values() if e.get("half")})
    families = sorted({e["family"] for e in by_trace.values() if e.get("family")})
    policies = [p for p in summary["policies"]]
    for half in halves:
        sub = {n: e for n, e in by_trace.items() if e.get("half") == half}
        lines += _policy_table(f"The {half} half", _per_policy(sub, policies))
    checks = goal_checks(summary)
    if checks:
        lines += ["## Daedalus goals", ""]
        lines += [
            f"- {goal}: {'n/a' if met is None else ('met' if met else '**missed**')} ({figure})"
            for goal, met, figure in checks
        ]
        lines.append("")
    verdicts = summary.get("verdicts")
    if verdicts:
        peers = [p for p in PEERS if any(p in v for v in verdicts.values())]
        lines += [
            "## Daedalus against each peer's front",
            "",
            "Below the front: fewer worker-hours than every setting of that peer with no more misses.",
            "",
            "| trace | " + " | ".join(peers) + " |",
            "|---|" + "---|" * len(peers),
        ]
        for name, verdict in verdicts.items():
            lines.append(
                f"| {name} | "
                + " | ".join(("below" if verdict[p] else "**not below**") if p in verdict else "–" for p in peers)
                + " |"
            )
        lines.append("")
    if families:
        for family in families:
            lines += [f"## Family: {family}", ""]
            for name, entry in by_trace.items():
                if entry.get("family") == family:
                    lines += _trace_table(name, entry)
    else:
        lines += ["## Traces", ""]
        for name, entry in by_trace.items():
            lines += _trace_table(name, entry)
    replayed = summary.get("dag_replay")
    if replayed:
        lines += _dag_replay_table(replayed, target_recovery_time_s)
    dag = summary.get("dag_testbed")
    if dag:
        lines += _dag_table(dag)
    return "\n".join(lines)


def _dag_replay_table(replayed: dict[str, Any], target_recovery_time_s: float) -> list[str]:
    lines = [
        "## Operator-DAG testbed: per-operator policies over the traces",
        "",
        "The windowed-aggregation query (map/filter -> keyed 10-s window -> sink) replayed through each trace "
        "(`lab/dag_replay.py`): every policy at its own sync period, a plan change is a restart (10 s + 0.5 s per "
        "slot) replaying from the last 10-s checkpoint, the same failure instants for every policy. Slots are task "
        "slots (no slot sharing); whole-job Daedalus runs every vertex at one parallelism with the same models. "
        f"SLO misses: episodes longer than {target_recovery_time_s:.0f} s (`lab.slo`).",
        "",
        "| trace | policy | slot-hours | x whole-job Daedalus | managed memory GB-h | SLO misses | rescales | "
        "final plan | slot memory MB |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for trace, rows in replayed.items():
        base = rows.get("daedalus", {}).get("slot_hours")
        for policy, row in rows.items():
            ratio = f"{row['slot_hours'] / base:.2f}" if base else "–"
            plan = "/".join(str(p) for p in row["final_parallelism"].values())
            lines.append(
                f"| {trace} | {policy} | {row['slot_hours']:.1f} | {ratio} | {row['managed_memory_gb_hours']:.1f} | "
                f"{row['slo_misses']} | {row['rescales']} | {plan} | {row['final_slot_memory_mb']:.0f} |"
            )
    return lines + [""]


def _dag_table(dag: dict[str, Any]) -> list[str]:
    lines = [
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
    return lines + [""]


def write_outputs(
    results: Sequence[RunResult],
    policies: Sequence[str],
    out_dir: Path,
    *,
    hours: float | None,
    failures_per_hour: float,
    seed: int,
    target_recovery_time_s: float,
    dag_testbed: dict[str, Any] | None = None,
    dag_replay: dict[str, Any] | None = None,
    plots: bool = True,
    rescale_cost: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """summary.json, report.md, one PNG per trace (and a front plot per trace of a sweep); returns their paths.
    ``rescale_cost`` (:func:`lab.settings.rescale_cost_of`) is what a rescale of the simulated job cost in these
    replays, recorded with the settings."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = build_summary(results, policies)
    summary["settings"] = {
        "hours": hours,
        "failures_per_hour": failures_per_hour,
        "seed": seed,
        "target_recovery_time_s": target_recovery_time_s,
    }
    if rescale_cost is not None:
        summary["settings"]["rescale_cost"] = rescale_cost
    if dag_testbed:
        summary["dag_testbed"] = dag_testbed
    if dag_replay:
        summary["dag_replay"] = dag_replay
    paths: dict[str, Path] = {"summary": out_dir / "summary.json", "report": out_dir / "report.md"}
    paths["summary"].write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    paths["report"].write_text(
        render_report(
            summary,
            hours=hours,
            failures_per_hour=failures_per_hour,
            seed=seed,
            target_recovery_time_s=target_recovery_time_s,
            rescale_cost=rescale_cost,
        )
    )
    if plots:
        for trace in summary["traces"]:
            trace_results = [r for r in results if r.trace_name == trace and "@" not in r.run.label]
            if trace_results:
                paths[f"plot:{trace}"] = out_dir / f"{trace}.png"
                plot_trace(trace, trace_results, paths[f"plot:{trace}"])
            if trace in summary.get("fronts", {}):
                paths[f"fronts:{trace}"] = out_dir / f"{trace}.fronts.png"
                optimal = summary["traces"][trace]["runs"].get(OPTIMAL)
                plot_fronts(
                    trace,
                    summary["fronts"][trace],
                    optimal,
                    summary["traces"][trace]["runs"].get("daedalus"),
                    paths[f"fronts:{trace}"],
                )
    return paths


__all__ = ["PEERS", "build_summary", "goal_checks", "pareto", "render_report", "write_outputs", "write_replay_outputs"]

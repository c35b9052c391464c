"""The lab's reports: summary.json, report.md and the plots of a replay or of an evaluation.

Kept apart from the runners (``lab.replay``, ``lab.evaluate``) so that running and reporting do not
import each other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.evaluate import DAG_POLICIES, PairResult
from lab.plots import plot_bars, plot_replay, plot_trace
from lab.replay import ReplayResult
from planner import DAG_ONLY_POLICIES


def write_replay_outputs(result: ReplayResult, out_dir: Path) -> dict[str, Path]:
    """Write a replay's summary.json and replay.png; return their paths."""
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



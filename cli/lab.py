"""The lab's commands: replay a trace, serve the simulator's metrics, evaluate policies, plan capacity.

They read the lab's settings tree (the agent's plus the simulated job and the lab-only policies).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.logging import configure_logging
from agent.settings import ConfigError
from cli.app import ConfigOption, app, console, fail, hours_done, print_summary, progress_bar, settings_from
from lab.evaluate import DEFAULT_POLICIES
from lab.settings import LabSettings
from simulator import Trace, TraceError, load_trace


def _load_trace(path: Path) -> Trace:
    try:
        return load_trace(path)
    except TraceError as exc:
        fail(str(exc))


@app.command("simulate")
def simulate(
    trace: Path = typer.Option(..., "--trace", help="Workload trace CSV (header time_s,rate).", dir_okay=False),
    policy: str = typer.Option(None, "--policy", help="Scaling policy: daedalus, static, ... (default: settings)."),
    out: Path = typer.Option(Path("out/simulate"), "--out", help="Directory for summary.json and the plot."),
    hours: float = typer.Option(None, "--hours", min=0.0, help="Replay only the first H hours of the trace."),
    dry_run: bool = typer.Option(None, "--dry-run/--no-dry-run", help="Plan and log rescales without applying them."),
    target_recovery_time_s: float = typer.Option(
        None, "--target-recovery-time-s", help="Target recovery time in seconds."
    ),
    failures_per_hour: float = typer.Option(
        0.0, "--failures-per-hour", min=0.0, help="Inject TaskManager failures at this Poisson rate."
    ),
    seed: int = typer.Option(None, "--seed", help="Simulator seed (default: settings simulator.seed)."),
    config: Path = ConfigOption,
    log_format: str = typer.Option("console", "--log-format", help="json or console."),
    log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error."),
    serve_metrics: str = typer.Option(
        None, "--serve-metrics", help="HOST:PORT: instead of a replay, run the job on wall-clock time and serve "
        "its metrics for Prometheus under the Flink/Kafka names the default queries use (until SIGTERM)."
    ),
    speed: float = typer.Option(1.0, "--speed", help="With --serve-metrics: simulated seconds per wall second."),
    follow_scale_target: bool = typer.Option(
        False, "--follow-scale-target", help="With --serve-metrics: follow the replicas of settings scale_target "
        "(like Flink reactive mode follows its TaskManagers)."
    ),
) -> None:
    """Replay a workload trace through the embedded simulated Flink job with the real agent loop."""
    settings = settings_from(
        config,
        {
            "policy": policy,
            "dry_run": dry_run,
            "target_recovery_time_s": target_recovery_time_s,
            "simulator.seed": seed,
            "telemetry.log_format": log_format,
            "telemetry.log_level": log_level,
        },
        LabSettings,
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    workload = _load_trace(trace)
    if serve_metrics is not None:
        _serve_metrics(workload, settings, address=serve_metrics, speed=speed, follow_scale_target=follow_scale_target)
    else:
        _replay(workload, settings, out=out, hours=hours, failures_per_hour=failures_per_hour)


def _replay(workload: Trace, settings: LabSettings, *, out: Path, hours: float | None, failures_per_hour: float) -> None:
    """Replay in simulated time with a progress bar; write and print the summary and the plot."""
    from lab.replay import ReplayError, replay
    from lab.report import write_replay_outputs

    with progress_bar("replay", remaining=True) as bar:
        task = bar.add_task(f"{workload.name} / {settings.policy}", total=None, sim="")

        def progress(done_s: int, total_s: int) -> None:
            bar.update(task, completed=done_s, total=total_s, sim=hours_done(done_s, total_s))

        try:
            result = replay(workload, settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)
        except (ReplayError, ConfigError) as exc:
            fail(str(exc))
    paths = write_replay_outputs(result, out)
    print_summary(result.summary)
    console.print(f"summary: {paths['summary']}\nplot:    {paths['plot']}")


def _serve_metrics(
    workload: Trace, settings: LabSettings, *, address: str, speed: float, follow_scale_target: bool
) -> None:
    """Run the simulated job on wall-clock time as a Prometheus target until SIGTERM."""
    from lab.exporter import ExporterError, serve

    try:
        serve(workload, settings, address=address, speed=speed, follow_scale_target=follow_scale_target)
    except ExporterError as exc:
        fail(str(exc))


@app.command("evaluate")
def evaluate(
    trace: list[Path] = typer.Option(None, "--trace", help="Workload trace CSV; repeat for several.", dir_okay=False),
    corpus: str = typer.Option(
        None, "--corpus", help="Every trace of the corpus (traces/corpus): dev, held-out or all (with or instead of --trace)."
    ),
    policies: str = typer.Option(
        ",".join(DEFAULT_POLICIES), "--policies", help="Comma-separated policies to compare (optimal: the offline schedule)."
    ),
    sweep: bool = typer.Option(
        False, "--sweep", help="Also run each policy over its main knob and plot worker-hours against SLO misses."
    ),
    out: Path = typer.Option(Path("out/evaluate"), "--out", help="Directory for summary.json, report.md and plots."),
    hours: float = typer.Option(None, "--hours", min=0.0, help="Replay only the first H hours of each trace."),
    failures_per_hour: float = typer.Option(
        1.0, "--failures-per-hour", min=0.0, help="Inject TaskManager failures at this Poisson rate (the same instants "
        "for every policy and the optimal schedule); 0 for none."
    ),
    seed: int = typer.Option(None, "--seed", help="Simulator seed shared by every replay (default: settings)."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="Replays run in parallel (default: CPUs, at most 2)."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write a plot per trace (and fronts with --sweep)."),
    config: Path = ConfigOption,
    log_level: str = typer.Option("error", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Replay every trace under every policy on identical simulator seeds and compare them with the optimal schedule."""
    from lab.evaluate import EvaluateError, corpus_refs, default_jobs, parse_policies, plan_runs, run_all, trace_refs
    from lab.report import write_outputs

    settings = settings_from(
        config,
        {"simulator.seed": seed, "telemetry.log_format": "console", "telemetry.log_level": log_level},
        LabSettings,
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    if not trace and corpus is None:
        fail("give --trace TRACE (repeatable) or --corpus dev|held-out|all")
    try:
        names = parse_policies(policies)
        refs = trace_refs(trace or []) + (corpus_refs(corpus) if corpus is not None else [])
        runs = plan_runs(refs, names, sweep=sweep)
    except EvaluateError as exc:
        fail(str(exc))
    _check_replayable([ref.path for ref in refs], settings, hours)
    with progress_bar("evaluate") as bar:
        if len(runs) <= 24:
            tasks = {run.key: bar.add_task(f"{run.trace.name} / {run.label}", total=None, sim="queued") for run in runs}

            def progress(key: tuple[str, str], done_s: int, total_s: int) -> None:
                bar.update(tasks[key], completed=done_s, total=total_s, sim=hours_done(done_s, total_s))
        else:
            # Many runs: one bar that counts finished runs.
            overall = bar.add_task(f"{len(runs)} runs on {len(refs)} traces", total=len(runs), sim="")
            finished: set[tuple[str, str]] = set()

            def progress(key: tuple[str, str], done_s: int, total_s: int) -> None:
                if done_s >= total_s and key not in finished:
                    finished.add(key)
                    bar.update(overall, completed=len(finished), sim=f"last: {key[0]} / {key[1]}")

        results = run_all(
            runs, settings, hours=hours, failures_per_hour=failures_per_hour, jobs=jobs or default_jobs(),
            on_progress=progress,
        )
        dag_testbed = _dag_testbed([ref.path for ref in refs], hours, bar) if "justin" in names else None
        dag_replay = _dag_replay([ref.path for ref in refs], names, hours, failures_per_hour, settings, jobs, bar)
    paths = write_outputs(
        results, names, out, hours=hours, failures_per_hour=failures_per_hour, seed=settings.simulator.seed,
        target_recovery_time_s=settings.target_recovery_time_s, dag_testbed=dag_testbed, dag_replay=dag_replay,
        plots=plots,
    )
    print(paths["report"].read_text())
    console.print(f"summary: {paths['summary']}\nreport:  {paths['report']}" + (f"\nplots:   {out}/*.png" if plots else ""))


def _check_replayable(traces: list[Path], settings: LabSettings, hours: float | None) -> None:
    """Every trace loads and covers at least one loop (exit 2 naming the file otherwise)."""
    if hours is not None and hours * 3600.0 < settings.loop_interval_s:
        fail(f"--hours {hours:g}: shorter than one loop ({settings.loop_interval_s:.0f} s)")
    for path in traces:
        workload = _load_trace(path)
        if workload.duration_s < settings.loop_interval_s:
            fail(f"{path}: trace covers {workload.duration_s:.0f} s, shorter than one loop")


def _dag_replay(
    traces: list[Path], names: list[str], hours: float | None, failures_per_hour: float, settings: LabSettings,
    jobs: int | None, bar: Progress,
) -> dict[str, Any] | None:
    """The per-operator policies over each trace on the operator-DAG testbed, beside whole-job Daedalus."""
    from lab.evaluate import dag_replay_lab, dag_replay_policies, default_jobs

    policies = dag_replay_policies(names)
    if not policies:
        return None
    task = bar.add_task(f"operator-DAG testbed replay / {', '.join(policies)}", total=len(traces), sim="")
    return dag_replay_lab(
        traces, policies, hours=hours, failures_per_hour=failures_per_hour, seed=settings.simulator.seed,
        target_recovery_time_s=settings.target_recovery_time_s, jobs=jobs or default_jobs(),
        on_trace=lambda name: bar.advance(task),
    )


def _dag_testbed(traces: list[Path], hours: float | None, bar: Progress) -> dict[str, Any]:
    """Justin runs where it applies, the operator-DAG testbed, beside DS2's per-operator form."""
    from lab.evaluate import dag_lab

    task = bar.add_task("operator-DAG testbed / ds2, justin", total=len(traces), sim="")
    out = {}
    for path in traces:
        out[path.stem] = dag_lab(path, hours=hours)
        bar.advance(task)
    return out


@app.command("capacity-plan")
def capacity_plan(
    target_rate: float = typer.Option(..., "--target-rate", help="Workload the production job must carry, records/s."),
    out: Path = typer.Option(..., "--out", help="Capacity model file to write (JSON).", dir_okay=False),
    max_runs: int = typer.Option(20, "--max-runs", help="Most testbed runs StreamBed may make."),
    testbed: str = typer.Option("simulated", "--testbed", help="Testbed to run on (simulated: the operator-DAG simulator)."),
    max_scale_out: int = typer.Option(16, "--max-scale-out", help="Write prior capacities for scale-outs 1..N."),
    seed: int = typer.Option(0, "--seed", help="Testbed seed."),
) -> None:
    """StreamBed: estimate capacity from small testbed runs; the agent reads the file via capacity_prior_path."""
    from lab.capacity_plan import CapacityPlanError, RunReport, plan_capacity

    if testbed != "simulated":
        fail(f"--testbed: unknown testbed {testbed!r}; known: simulated")
    with Progress(
        TextColumn("[bold]capacity-plan[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("testbed runs", total=max_runs)

        def progress(report: RunReport) -> None:
            bar.update(
                task,
                completed=report.index,
                description=f"{report.purpose} {report.task_slots} slots {report.memory_mb:.0f} MB: "
                f"{report.mst:,.0f} rec/s",
            )

        try:
            model = plan_capacity(
                target_rate=target_rate, max_runs=max_runs, out_path=out, progress=progress,
                seed=seed, max_scale_out=max_scale_out,
            )
        except CapacityPlanError as exc:
            fail(str(exc))
    table = Table(title="StreamBed capacity model", show_header=False)
    table.add_row("surrogate", model.surrogate.family)
    table.add_row("testbed runs", str(model.testbed_runs))
    table.add_row("task slots for target (110 %)", str(model.task_slots_for_target))
    for n in sorted(model.capacities)[:: max(1, len(model.capacities) // 8)]:
        table.add_row(f"capacity at {n}", f"{model.capacities[n]:,.0f} rec/s")
    Console().print(table)
    console.print(f"model: {out}")

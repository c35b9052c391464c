"""The ``perdix`` command line (typer). Bad input exits 2 with one line saying what and where."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from agent.logging import configure_logging
from agent.settings import ConfigError, Settings, load_settings

app = typer.Typer(
    name="perdix",
    help="Perdix: a runtime autoscaler for Apache Flink jobs (Daedalus MAPE-K loop).\n\n"
    "Settings come from a YAML file (--config), overridden by PERDIX_* environment variables "
    "(nested keys with __, e.g. PERDIX_PROMETHEUS__URL), overridden by flags.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
EXIT_BAD_INPUT = 2


def fail(message: str) -> NoReturn:
    """Print one line and exit 2 (bad input or bad configuration)."""
    console.print(f"perdix: error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def settings_from(config: Path | None, overrides: dict[str, Any]) -> Settings:
    """Load settings or exit 2 with the one-line reason."""
    try:
        return load_settings(config, overrides)
    except ConfigError as exc:
        fail(str(exc))


ConfigOption = typer.Option(None, "--config", "-c", help="YAML settings file.", dir_okay=False)


@app.command("version")
def version_command() -> None:
    """Print the Perdix version."""
    try:
        print(version("perdix"))
    except PackageNotFoundError:
        print("unknown (not installed)")


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
    from agent.replay import ReplayError, replay, write_outputs
    from simulator import TraceError, load_trace

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
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    try:
        workload = load_trace(trace)
    except TraceError as exc:
        fail(str(exc))
    if serve_metrics is not None:
        from agent.exporter import ExporterError, serve

        try:
            serve(workload, settings, address=serve_metrics, speed=speed, follow_scale_target=follow_scale_target)
        except ExporterError as exc:
            fail(str(exc))
        return
    with Progress(
        TextColumn("[bold]replay[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.fields[sim]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task(f"{workload.name} / {settings.policy}", total=None, sim="")

        def progress(done_s: int, total_s: int) -> None:
            bar.update(task, completed=done_s, total=total_s, sim=f"{done_s / 3600:.2f}/{total_s / 3600:.2f} h")

        try:
            result = replay(workload, settings, hours=hours, failures_per_hour=failures_per_hour, progress=progress)
        except (ReplayError, ConfigError) as exc:
            fail(str(exc))
    paths = write_outputs(result, out)
    print_summary(result.summary)
    console.print(f"summary: {paths['summary']}\nplot:    {paths['plot']}")


@app.command("run")
def run(
    config: Path = typer.Option(None, "--config", "-c", help="YAML settings file (the Helm chart renders it).", dir_okay=False),
    dry_run: bool = typer.Option(None, "--dry-run/--no-dry-run", help="Plan, log and leave Events without rescaling."),
    log_format: str = typer.Option(None, "--log-format", help="json or console (default: settings)."),
    log_level: str = typer.Option(None, "--log-level", help="debug, info, warning or error (default: settings)."),
) -> None:
    """Run the production daemon: Prometheus monitor, Kubernetes executor, /metrics /healthz /readyz; stops on SIGTERM."""
    from agent.daemon import Daemon, StartupError

    settings = settings_from(
        config, {"dry_run": dry_run, "telemetry.log_format": log_format, "telemetry.log_level": log_level}
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    try:
        daemon = Daemon(settings)
        daemon.run_until_signal()
    except (StartupError, ConfigError) as exc:
        fail(str(exc))


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
    from agent.capacity_plan import CapacityPlanError, RunReport, plan_capacity

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


@app.command("evaluate")
def evaluate(
    trace: list[Path] = typer.Option(..., "--trace", help="Workload trace CSV; repeat for several.", dir_okay=False),
    policies: str = typer.Option(
        "daedalus,ds2,hpa,keda-lag,static,oracle", "--policies", help="Comma-separated policies to compare."
    ),
    out: Path = typer.Option(Path("out/evaluate"), "--out", help="Directory for summary.json, report.md and plots."),
    hours: float = typer.Option(None, "--hours", min=0.0, help="Replay only the first H hours of each trace."),
    failures_per_hour: float = typer.Option(
        0.0, "--failures-per-hour", min=0.0, help="Inject TaskManager failures at this Poisson rate (same for all)."
    ),
    seed: int = typer.Option(None, "--seed", help="Simulator seed shared by every replay (default: settings)."),
    jobs: int = typer.Option(None, "--jobs", min=1, help="Replays run in parallel (default: CPUs, at most 2)."),
    config: Path = ConfigOption,
    log_level: str = typer.Option("error", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Replay every trace under every policy on identical simulator seeds and compare them with the oracle."""
    from agent.evaluate import (
        EvaluateError,
        dag_lab,
        default_jobs,
        parse_policies,
        plan_pairs,
        run_pairs,
        write_outputs,
    )
    from simulator import TraceError, load_trace

    settings = settings_from(
        config,
        {"simulator.seed": seed, "telemetry.log_format": "console", "telemetry.log_level": log_level},
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    try:
        names = parse_policies(policies)
        pairs = plan_pairs(trace, names)
    except EvaluateError as exc:
        fail(str(exc))
    for path in trace:
        try:
            workload = load_trace(path)
        except TraceError as exc:
            fail(str(exc))
        if hours is not None and hours * 3600.0 < settings.loop_interval_s:
            fail(f"--hours {hours:g}: shorter than one loop ({settings.loop_interval_s:.0f} s)")
        if workload.duration_s < settings.loop_interval_s:
            fail(f"{path}: trace covers {workload.duration_s:.0f} s, shorter than one loop")
    with Progress(
        TextColumn("[bold]evaluate[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.fields[sim]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks = {
            (pair.trace_name, pair.policy): bar.add_task(f"{pair.trace_name} / {pair.policy}", total=None, sim="queued")
            for pair in pairs
        }

        def progress(key: tuple[str, str], done_s: int, total_s: int) -> None:
            bar.update(tasks[key], completed=done_s, total=total_s, sim=f"{done_s / 3600:.2f}/{total_s / 3600:.2f} h")

        results = run_pairs(
            pairs,
            settings,
            hours=hours,
            failures_per_hour=failures_per_hour,
            jobs=jobs or default_jobs(),
            on_progress=progress,
        )
        dag_testbed = None
        if "justin" in names:
            # Justin runs where it applies, the operator-DAG testbed, beside DS2's per-operator form.
            dag_task = bar.add_task("operator-DAG testbed / ds2, justin", total=len(trace), sim="")
            dag_testbed = {}
            for path in trace:
                dag_testbed[path.stem] = dag_lab(path, hours=hours)
                bar.advance(dag_task)
    paths = write_outputs(
        results,
        [path.stem for path in trace],
        names,
        out,
        hours=hours,
        failures_per_hour=failures_per_hour,
        seed=settings.simulator.seed,
        dag_testbed=dag_testbed,
    )
    print(paths["report"].read_text())
    console.print("\n".join(f"{name}: {path}" for name, path in paths.items()))


def print_summary(summary: dict[str, Any]) -> None:
    """A two-column table of the replay summary."""
    table = Table(title=f"{summary['trace']} — {summary['policy']}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:,.3f}"
        elif isinstance(value, int) and not isinstance(value, bool):
            value = f"{value:,}"
        table.add_row(key, str(value))
    Console().print(table)


@app.command("export-history")
def export_history(
    out: str = typer.Option(..., "--out", help="History root: a local path or a URI (s3://, hdfs://, ...)."),
    job: str = typer.Option(..., "--job", help="Job name (the job=... partition)."),
    prometheus: str = typer.Option(None, "--prometheus", help="Prometheus base URL to export from."),
    from_simulation: Path = typer.Option(
        None, "--from-simulation", help="Replay this trace CSV through the simulator instead.", dir_okay=False
    ),
    since: str = typer.Option(
        None, "--since", help="Start: ISO time, or a duration before --until such as 14d or 6h. "
        "With --from-simulation: the time of simulated second 0 (default 2026-01-01)."
    ),
    until: str = typer.Option(None, "--until", help="End (exclusive), ISO time; default now (Prometheus only)."),
    step_s: int = typer.Option(60, "--step-s", min=1, help="Sample spacing of the history, seconds."),
    hours: float = typer.Option(None, "--hours", min=0.0, help="Simulation only: replay only the first H hours."),
    parallelism: int = typer.Option(None, "--parallelism", min=1, help="Simulation only: static scale-out."),
    config: Path = ConfigOption,
) -> None:
    """Write a job's workload history as Parquet partitioned by job and date (re-exports replace, never duplicate)."""
    from datetime import UTC, datetime

    from agent.history_export import (
        ExportError,
        describe,
        export_from_prometheus,
        export_from_simulation,
        parse_range,
        prometheus_client,
    )
    from spark.history import HistoryError

    if (prometheus is None) == (from_simulation is None):
        fail("give exactly one of --prometheus URL or --from-simulation TRACE")
    settings = settings_from(config, {"prometheus.url": prometheus})
    try:
        if from_simulation is not None:
            result = export_from_simulation(
                from_simulation, job=job, out=out, start=since or "2026-01-01", hours=hours, step_s=step_s,
                simulator=settings.simulator, parallelism=parallelism,
            )
        else:
            if since is None:
                fail("--since is required with --prometheus (an ISO time or a duration like 14d)")
            # The wall clock is read once, here at the edge, only to default --until.
            start, end = parse_range(since, until, now=datetime.now(UTC))
            client = prometheus_client(settings.prometheus.url, timeout_s=settings.prometheus.timeout_s)
            result = export_from_prometheus(
                client=client, job=job, since=start, until=end, out=out, queries=settings.prometheus.queries,
                worker_label=settings.prometheus.worker_label, step_s=float(step_s),
            )
    except (ExportError, HistoryError, OSError) as exc:
        fail(str(exc))
    print(describe(result))


@app.command("retrain")
def retrain(
    history: str = typer.Option(..., "--history", help="History root written by export-history (path or URI)."),
    registry: str = typer.Option(..., "--registry", help="Model registry root (path or URI)."),
    master: str = typer.Option(None, "--master", help="Spark master (default local[*])."),
    keep: int = typer.Option(5, "--keep", min=1, help="Model versions kept per job."),
    job: list[str] = typer.Option(None, "--job", help="Only this job (repeatable)."),
    residual: str = typer.Option(None, "--residual", help="Residual model: statsforecast-arima, arima, linear, naive."),
    serial: bool = typer.Option(False, "--serial", help="Fit in this process, one job after another, without Spark."),
) -> None:
    """Fit and back-test a forecaster per job with Spark and publish the models to the registry."""
    from dataclasses import replace

    from spark.history import HistoryError
    from spark.registry import RegistryError
    from spark.retrain import build_session, format_summary, run_serial, run_spark
    from spark.training import RetrainConfig

    try:
        config = RetrainConfig() if residual is None else replace(RetrainConfig(), residual=residual)
        config.make_model()
        if serial:
            summary = run_serial(history=history, registry_uri=registry, config=config, keep=keep, jobs=job or None)
        else:
            spark = build_session(master or "local[*]")
            try:
                summary = run_spark(spark, history=history, registry_uri=registry, config=config, keep=keep, jobs=job or None)
            finally:
                spark.stop()
    except (HistoryError, RegistryError, ValueError) as exc:
        fail(str(exc))
    print(format_summary(summary))
    if summary.count("failed"):
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()

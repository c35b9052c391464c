"""The batch side's commands: export a job's workload history to Parquet, and retrain forecasters with Spark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cli.app import MAX_HOURS, ConfigOption, app, check_output_dir, fail, settings_from
from cli.extras import require_extra
from lab.settings import LabSettings

if TYPE_CHECKING:
    from simulator import SimulatorSettings
    from spark.export import ExportResult


SIMULATION_START = "2026-01-01"
"""The time of a simulated history's second 0 when ``--since`` does not say."""


@app.command("export-history")
def export_history(
    out: str = typer.Option(..., "--out", help="History root: a local path or a URI (s3://, hdfs://, ...)."),
    job: str = typer.Option(..., "--job", help="Job name (the job=... partition)."),
    prometheus: str = typer.Option(None, "--prometheus", help="Prometheus base URL to export from."),
    from_simulation: Path = typer.Option(
        None, "--from-simulation", help="Replay this trace CSV through the simulator instead.", dir_okay=False
    ),
    since: str = typer.Option(
        None,
        "--since",
        help="Start: ISO time, or a duration before --until such as 14d or 6h. "
        f"With --from-simulation: the time of simulated second 0 (default {SIMULATION_START}).",
    ),
    until: str = typer.Option(None, "--until", help="End (exclusive), ISO time; default now (Prometheus only)."),
    step_s: int = typer.Option(60, "--step-s", min=1, max=86_400, help="Sample spacing of the history, seconds."),
    hours: float = typer.Option(
        None, "--hours", min=0.0, max=MAX_HOURS, help="Simulation only: replay only the first H hours."
    ),
    parallelism: int = typer.Option(
        None, "--parallelism", min=1, max=32_768, help="Simulation only: static scale-out."
    ),
    config: Path = ConfigOption,
) -> None:
    """Write a job's workload history as Parquet partitioned by job and date (re-exports replace, never duplicate)."""
    require_extra("export-history", "batch", *(["lab"] if from_simulation is not None else []))
    from spark.export import ExportError, describe
    from spark.history import HistoryError

    if (prometheus is None) == (from_simulation is None):
        fail("give exactly one of --prometheus URL or --from-simulation TRACE")
    if from_simulation is not None and until is not None:
        fail("--until applies to --prometheus only: a simulated history ends with its trace or --hours")
    if prometheus is not None and (hours is not None or parallelism is not None):
        fail("--hours and --parallelism apply to --from-simulation only")
    if "://" not in out:
        check_output_dir(Path(out), [])
    settings = settings_from(config, {"prometheus.url": prometheus}, LabSettings)
    try:
        if from_simulation is not None:
            result = export_from_simulation(
                from_simulation,
                job=job,
                out=out,
                start=since or SIMULATION_START,
                hours=hours,
                step_s=step_s,
                simulator=settings.simulator,
                parallelism=parallelism,
            )
        else:
            if since is None:
                fail("--since is required with --prometheus (an ISO time or a duration like 14d)")
            result = _export_from_prometheus(settings, job=job, out=out, since=since, until=until, step_s=step_s)
    except (ExportError, HistoryError, OSError) as exc:
        fail(str(exc))
    print(describe(result))


def _export_from_prometheus(
    settings: LabSettings, *, job: str, out: str, since: str, until: str | None, step_s: int
) -> ExportResult:
    """``job``'s history over [since, until) from the Prometheus of ``settings``, read by its queries."""
    from datetime import UTC, datetime

    from spark.export import export_from_prometheus, parse_range, prometheus_client

    # The wall clock is read once, here at the edge, only to default --until.
    start, end = parse_range(since, until, now=datetime.now(UTC))
    prometheus = settings.prometheus
    return export_from_prometheus(
        client=prometheus_client(prometheus.url, timeout_s=prometheus.timeout_s),
        job=job,
        since=start,
        until=end,
        out=out,
        queries={name: prometheus.render(query) for name, query in prometheus.queries.model_dump().items()},
        worker_label=prometheus.worker_label,
        step_s=float(step_s),
    )


def export_from_simulation(
    trace_path: Path | str,
    *,
    job: str,
    out: str,
    start: str,
    hours: float | None = None,
    step_s: int = 60,
    simulator: SimulatorSettings | None = None,
    parallelism: int | None = None,
) -> ExportResult:
    """Replay a trace through the simulator (the lab) and write it as ``job``'s history (Spark's exporter).

    Raises ``spark.export.ExportError`` with one line for a bad trace or parallelism.
    """
    from lab.history import SimulationError, simulate_history
    from simulator import TraceError
    from spark.export import ExportError, export_frame
    from spark.history import HistoryError, as_utc, check_job_name

    check_job_name(job)
    try:
        first = as_utc(start)
    except HistoryError as exc:
        raise ExportError(f"--since: {exc}") from None
    try:
        frame = simulate_history(
            trace_path, start=first, hours=hours, step_s=step_s, simulator=simulator, parallelism=parallelism
        )
    except (SimulationError, TraceError) as exc:
        raise ExportError(str(exc)) from None
    return export_frame(frame, job=job, out=out, start=first, step_s=step_s)


@app.command("retrain")
def retrain(
    history: str = typer.Option(..., "--history", help="History root written by export-history (path or URI)."),
    registry: str = typer.Option(..., "--registry", help="Model registry root (path or URI)."),
    master: str = typer.Option("local[*]", "--master", help="Spark master."),
    keep: int = typer.Option(5, "--keep", min=1, max=1000, help="Model versions kept per job."),
    job: list[str] = typer.Option(None, "--job", help="Only this job (repeatable)."),
    residual: str = typer.Option(None, "--residual", help="Residual model: statsforecast-arima, arima, linear, naive."),
    serial: bool = typer.Option(False, "--serial", help="Fit in this process, one job after another, without Spark."),
) -> None:
    """Fit and back-test a forecaster per job with Spark and publish the models to the registry."""
    require_extra("retrain", "batch")
    from dataclasses import replace

    from models.registry import RegistryError
    from spark.history import HistoryError
    from spark.retrain import build_session, format_summary, run_serial, run_spark
    from spark.training import RetrainConfig

    try:
        config = RetrainConfig() if residual is None else replace(RetrainConfig(), residual=residual)
        config.make_model()
        if serial:
            summary = run_serial(history=history, registry_uri=registry, config=config, keep=keep, jobs=job or None)
        else:
            spark = build_session(master)
            try:
                summary = run_spark(
                    spark, history=history, registry_uri=registry, config=config, keep=keep, jobs=job or None
                )
            finally:
                spark.stop()
    except (HistoryError, RegistryError, ValueError) as exc:
        fail(str(exc))
    print(format_summary(summary))
    if summary.count("failed"):
        raise typer.Exit(1)

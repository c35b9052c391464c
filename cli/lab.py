"""The lab's commands: replay a trace, serve the simulator's metrics, evaluate policies, plan capacity.

They read the lab's settings tree (the agent's plus the simulated job and the lab-only policies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer._click.core import ParameterSource

from agent.logging import configure_logging
from agent.settings import ConfigError
from cli.app import (
    MAX_FAILURES_PER_HOUR,
    MAX_HOURS,
    ConfigOption,
    app,
    check_output_dir,
    check_output_file,
    console,
    fail,
    hours_done,
    print_summary,
    progress_bar,
    setting_help,
    settings_from,
)
from cli.extras import require_extra
from lab.evaluate import DEFAULT_POLICIES
from lab.settings import (
    LAB_POLICIES,
    RESCALE_COST_DEFAULT,
    RESCALE_COSTS,
    LabSettings,
    rescale_cost_of,
    rescale_cost_overrides,
)
from planner import registry
from simulator import Trace, TraceError, load_trace

if TYPE_CHECKING:  # the lab's StreamBed parts load with the command that uses them
    from lab.capacity_plan import RunReport
    from lab.flink.testbed import FlinkTestbedSettings, PhaseEvent
    from models.streambed import CapacityModelFile, EstimatorSettings


RescaleCostOption = typer.Option(
    None,
    "--rescale-cost",
    help="What a rescale of the simulated job costs: "
    + " or ".join(RESCALE_COSTS)
    + f" (lab.settings.RESCALE_COSTS; default: what the settings describe, {RESCALE_COST_DEFAULT}).",
)


def _rescale_cost(name: str | None) -> dict[str, float | bool]:
    try:
        return rescale_cost_overrides(name)
    except ValueError as exc:
        fail(f"--rescale-cost: {exc}")


def _load_trace(path: Path) -> Trace:
    try:
        return load_trace(path)
    except TraceError as exc:
        fail(str(exc))


@app.command("simulate")
def simulate(
    trace: Path = typer.Option(..., "--trace", help="Workload trace CSV (header time_s,rate).", dir_okay=False),
    policy: str = typer.Option(
        None, "--policy", help=setting_help(f"Scaling policy: one of {', '.join(LAB_POLICIES)}.", LabSettings, "policy")
    ),
    out: Path = typer.Option(Path("out/simulate"), "--out", help="Directory for summary.json and the plot."),
    hours: float = typer.Option(
        None, "--hours", min=0.0, max=MAX_HOURS, help="Replay only the first H hours of the trace."
    ),
    dry_run: bool = typer.Option(
        None,
        "--dry-run/--no-dry-run",
        help=setting_help("Plan and log rescales without applying them", LabSettings, "dry_run"),
    ),
    target_recovery_time_s: float = typer.Option(
        None,
        "--target-recovery-time-s",
        help=setting_help("Target recovery time in seconds", LabSettings, "target_recovery_time_s"),
    ),
    failures_per_hour: float = typer.Option(
        0.0,
        "--failures-per-hour",
        min=0.0,
        max=MAX_FAILURES_PER_HOUR,
        help="Inject TaskManager failures at this Poisson rate.",
    ),
    seed: int = typer.Option(None, "--seed", help=setting_help("Simulator seed", LabSettings, "simulator.seed")),
    rescale_cost: str = RescaleCostOption,
    config: Path = ConfigOption,
    log_format: str = typer.Option("console", "--log-format", help="json or console."),
    log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error."),
    serve_metrics: str = typer.Option(
        None,
        "--serve-metrics",
        help="HOST:PORT: instead of a replay, run the job on wall-clock time and serve "
        "its metrics for Prometheus under the Flink/Kafka names the default queries use (until SIGTERM).",
    ),
    speed: float = typer.Option(
        1.0,
        "--speed",
        min=0.0,
        help="With --serve-metrics: simulated seconds per wall second (above 0, at most 1,000).",
    ),
    follow_scale_target: bool = typer.Option(
        False,
        "--follow-scale-target",
        help="With --serve-metrics: follow the replicas of settings scale_target "
        "(like Flink reactive mode follows its TaskManagers).",
    ),
) -> None:
    """Replay a workload trace through the embedded simulated Flink job with the real agent loop."""
    require_extra("simulate", "lab")
    settings = settings_from(
        config,
        {
            "policy": policy,
            "dry_run": dry_run,
            "target_recovery_time_s": target_recovery_time_s,
            "simulator.seed": seed,
            **_rescale_cost(rescale_cost),
            "telemetry.log_format": log_format,
            "telemetry.log_level": log_level,
        },
        LabSettings,
    )
    if serve_metrics is None and (speed != 1.0 or follow_scale_target):
        fail(
            f"{'--speed' if speed != 1.0 else '--follow-scale-target'}: only with --serve-metrics (a replay runs on "
            "simulated time)"
        )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    workload = _load_trace(trace)
    if serve_metrics is not None:
        _serve_metrics(workload, settings, address=serve_metrics, speed=speed, follow_scale_target=follow_scale_target)
    else:
        from lab.report import REPLAY_OUTPUTS

        _check_covers_a_loop(trace, workload, settings, hours)
        _check_prior(settings)
        check_output_dir(out, REPLAY_OUTPUTS)
        _replay(workload, settings, out=out, hours=hours, failures_per_hour=failures_per_hour)


def _replay(
    workload: Trace, settings: LabSettings, *, out: Path, hours: float | None, failures_per_hour: float
) -> None:
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
        None,
        "--corpus",
        help="Every trace of the corpus (traces/corpus): dev, held-out or all (with or instead of --trace).",
    ),
    policies: str = typer.Option(
        ",".join(DEFAULT_POLICIES),
        "--policies",
        help=f"Comma-separated policies to compare, of {', '.join(registry.SPECS)} and optimal (the offline schedule).",
    ),
    sweep: bool = typer.Option(
        False, "--sweep", help="Also run each policy over its main knob and plot worker-hours against SLO misses."
    ),
    out: Path = typer.Option(Path("out/evaluate"), "--out", help="Directory for summary.json, report.md and plots."),
    hours: float = typer.Option(
        None, "--hours", min=0.0, max=MAX_HOURS, help="Replay only the first H hours of each trace."
    ),
    failures_per_hour: float = typer.Option(
        1.0,
        "--failures-per-hour",
        min=0.0,
        max=MAX_FAILURES_PER_HOUR,
        help="Inject TaskManager failures at this Poisson rate (the same instants "
        "for every policy and the optimal schedule); 0 for none.",
    ),
    seed: int = typer.Option(
        None, "--seed", help=setting_help("Simulator seed shared by every replay", LabSettings, "simulator.seed")
    ),
    jobs: int = typer.Option(None, "--jobs", min=1, max=64, help="Replays run in parallel (default: CPUs, at most 2)."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write a plot per trace (and fronts with --sweep)."),
    rescale_cost: str = RescaleCostOption,
    config: Path = ConfigOption,
    log_level: str = typer.Option("error", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Replay every trace under every policy on identical simulator seeds and compare them with the optimal schedule."""
    require_extra("evaluate", "lab")
    from lab.evaluate import EvaluateError, corpus_refs, default_jobs, parse_policies, plan_runs, run_all, trace_refs
    from lab.report import evaluation_outputs, write_outputs

    settings = settings_from(
        config,
        {
            "simulator.seed": seed,
            **_rescale_cost(rescale_cost),
            "telemetry.log_format": "console",
            "telemetry.log_level": log_level,
        },
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
    _check_prior(settings)
    check_output_dir(out, evaluation_outputs(sorted({run.trace.name for run in runs}), plots=plots, sweep=sweep))
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
            runs,
            settings,
            hours=hours,
            failures_per_hour=failures_per_hour,
            jobs=jobs or default_jobs(),
            on_progress=progress,
        )
        dag_testbed = _dag_testbed([ref.path for ref in refs], hours, bar) if "justin" in names else None
        dag_replay = _dag_replay([ref.path for ref in refs], names, hours, failures_per_hour, settings, jobs, bar)
    paths = write_outputs(
        results,
        names,
        out,
        hours=hours,
        failures_per_hour=failures_per_hour,
        seed=settings.simulator.seed,
        target_recovery_time_s=settings.target_recovery_time_s,
        dag_testbed=dag_testbed,
        dag_replay=dag_replay,
        plots=plots,
        rescale_cost=rescale_cost_of(settings),
    )
    print(paths["report"].read_text())
    console.print(
        f"summary: {paths['summary']}\nreport:  {paths['report']}" + (f"\nplots:   {out}/*.png" if plots else "")
    )


def _check_replayable(traces: list[Path], settings: LabSettings, hours: float | None) -> None:
    """Every trace loads and covers at least one loop (exit 2 naming the file otherwise)."""
    for path in traces:
        _check_covers_a_loop(path, _load_trace(path), settings, hours)


def _check_prior(settings: LabSettings) -> None:
    """Exit 2 naming the file unless the capacity prior (when set) reads, and naming ``model_registry`` unless the
    registry (when set) opens, before any progress is shown."""
    from agent.analyze import load_prior
    from models.registry import RegistryError, RegistryReader

    if settings.capacity_prior_path is not None:
        try:
            load_prior(settings.capacity_prior_path)
        except ConfigError as exc:
            fail(str(exc))
    if settings.model_registry:
        try:
            RegistryReader(settings.model_registry)
        except RegistryError as exc:
            fail(f"model_registry: {exc}")


def _check_covers_a_loop(path: Path, workload: Trace, settings: LabSettings, hours: float | None) -> None:
    """Exit 2 unless the replay of ``workload`` (its first ``hours``) lasts at least one loop."""
    if hours is not None and hours * 3600.0 < settings.loop_interval_s:
        fail(f"--hours {hours:g}: shorter than one loop ({settings.loop_interval_s:g} s)")
    if workload.duration_s < settings.loop_interval_s:
        fail(
            f"{path}: trace covers {workload.duration_s:.0f} s, shorter than one loop ({settings.loop_interval_s:g} s)"
        )
    if hours is None and workload.duration_s > MAX_HOURS * 3600.0:
        fail(
            f"{path}: trace covers {workload.duration_s / 3600.0:,.0f} h, longer than the {MAX_HOURS:g} h a replay "
            "runs at most; replay its first hours with --hours"
        )


def _dag_replay(
    traces: list[Path],
    names: list[str],
    hours: float | None,
    failures_per_hour: float,
    settings: LabSettings,
    jobs: int | None,
    bar: Progress,
) -> dict[str, Any] | None:
    """The per-operator policies over each trace on the operator-DAG testbed, beside whole-job Daedalus."""
    from lab.evaluate import dag_replay_lab, dag_replay_policies, default_jobs

    policies = dag_replay_policies(names)
    if not policies:
        return None
    task = bar.add_task(f"operator-DAG testbed replay / {', '.join(policies)}", total=len(traces), sim="")
    return dag_replay_lab(
        traces,
        policies,
        hours=hours,
        failures_per_hour=failures_per_hour,
        seed=settings.simulator.seed,
        target_recovery_time_s=settings.target_recovery_time_s,
        jobs=jobs or default_jobs(),
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


MAX_RUNS = {"simulated": 20, "flink": 4}
"""Most testbed runs StreamBed makes on each testbed unless --max-runs says otherwise."""
FLINK_ONLY = (
    "min_slots",
    "max_slots",
    "capacity_per_slot",
    "max_rate",
    "min_rate_fraction",
    "measure_s",
    "rampup_s",
    "probes",
    "cluster_warmup_s",
    "skew",
    "rest_url",
    "prometheus",
    "workdir",
)
"""The options of capacity-plan that only the Flink testbed reads."""


def _flags_given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """The flags of the parameters ``names`` set on the command line, as typed (``--skew``)."""
    return [
        param.opts[0]
        for param in ctx.command.params
        if param.name in names and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    ]


@app.command("capacity-plan")
def capacity_plan(
    ctx: typer.Context,
    target_rate: float = typer.Option(
        ..., "--target-rate", min=0.0, max=1e12, help="Workload the production job must carry, records/s."
    ),
    out: Path = typer.Option(..., "--out", help="Capacity model file to write (JSON).", dir_okay=False),
    max_runs: int = typer.Option(
        None,
        "--max-runs",
        min=3,
        max=1000,
        help="Most testbed runs StreamBed may make, at least 3 (a surrogate needs 3 measurements; default: "
        f"{MAX_RUNS['simulated']} simulated, {MAX_RUNS['flink']} on Flink).",
    ),
    testbed: str = typer.Option(
        "simulated",
        "--testbed",
        help="simulated: the operator-DAG simulator; flink: the trace job on a real Flink cluster.",
    ),
    max_scale_out: int = typer.Option(
        16, "--max-scale-out", min=1, max=32_768, help="Write prior capacities for scale-outs 1..N."
    ),
    seed: int = typer.Option(
        0, "--seed", min=0, max=2**32 - 1, help="Testbed seed (on Flink: the shuffle of the partition weights)."
    ),
    min_slots: int = typer.Option(1, "--min-slots", max=1024, help="Flink: fewest task slots explored."),
    max_slots: int = typer.Option(
        2,
        "--max-slots",
        max=1024,
        help="Flink: most task slots explored; a local cluster gets this many one-slot TaskManagers.",
    ),
    capacity_per_slot: float = typer.Option(
        2000.0,
        "--capacity-per-slot",
        max=1e9,
        help="Flink: records/s one slot of the trace job carries (its --capacity).",
    ),
    max_rate: float = typer.Option(
        None,
        "--max-rate",
        max=1e12,
        help="Flink: records/s injected during each run's warmup, above its MST "
        "(default: 2x capacity per slot x slots).",
    ),
    min_rate_fraction: float = typer.Option(
        0.8,
        "--min-rate-fraction",
        max=1.0,
        help="Flink: lowest rate the search tries, as a fraction of the saturated warmup throughput.",
    ),
    measure_s: int = typer.Option(
        10, "--measure-s", max=3600, help="Flink: observation per probe and warmup, seconds."
    ),
    rampup_s: int = typer.Option(
        3, "--rampup-s", max=3600, help="Flink: wait after each submission before observing, seconds."
    ),
    probes: int = typer.Option(4, "--probes", max=100, help="Flink: most probes of the binary search per testbed run."),
    cluster_warmup_s: float = typer.Option(
        45.0,
        "--cluster-warmup-s",
        max=3600.0,
        help="Flink: run the job at an overload on every slot this long before the first run (0: none).",
    ),
    skew: float = typer.Option(0.0, "--skew", max=10.0, help="Flink: Zipf skew of the partitions (0: even load)."),
    rest_url: str = typer.Option(
        None, "--rest-url", help="Flink: REST URL of an existing testbed cluster (default: start a local one)."
    ),
    prometheus: str = typer.Option(
        None, "--prometheus", help="Flink: URL of the Prometheus that scrapes that cluster each second."
    ),
    workdir: Path = typer.Option(
        None,
        "--workdir",
        file_okay=False,
        help="Flink: keep the local cluster's configuration and logs here (default: a temporary directory).",
    ),
) -> None:
    """StreamBed: estimate capacity from small testbed runs; the agent reads the file via capacity_prior_path."""
    require_extra("capacity-plan", "lab")
    from lab.capacity_plan import CapacityPlanError

    if not target_rate > 0:
        fail(f"--target-rate: must be above 0 records/s, got {target_rate:g}")
    check_output_file(out)
    flink: _FlinkPlan | None = None
    if testbed == "simulated":
        given = _flags_given(ctx, FLINK_ONLY)
        if given:
            fail(f"{', '.join(given)}: only for --testbed flink")
    elif testbed == "flink":
        flink = _flink_plan(seed=seed, **{name: ctx.params[name] for name in FLINK_ONLY})
    else:
        fail(f"--testbed: unknown testbed {testbed!r}; known: simulated, flink")
    runs = max_runs if max_runs is not None else MAX_RUNS[testbed]
    try:
        model = _plan_with_progress(
            flink, target_rate=target_rate, out=out, max_runs=runs, max_scale_out=max_scale_out, seed=seed
        )
    except CapacityPlanError as exc:
        fail(str(exc))
    _print_capacity_model(model, on_flink=flink is not None)
    console.print(f"model: {out}")


def _plan_with_progress(
    flink: _FlinkPlan | None, *, target_rate: float, out: Path, max_runs: int, max_scale_out: int, seed: int
) -> CapacityModelFile:
    """StreamBed on the simulated testbed (``flink`` None) or on Flink, with a bar over its testbed runs."""
    with Progress(
        TextColumn("[bold]capacity-plan[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        overall = bar.add_task("testbed runs", total=max_runs, unit="runs")

        def progress(report: RunReport) -> None:
            bar.update(
                overall,
                completed=report.index,
                description=f"{report.purpose} {report.task_slots} slots {report.memory_mb:.0f} MB: "
                f"{report.mst:,.0f} rec/s",
            )

        if flink is None:
            from lab.capacity_plan import plan_capacity

            return plan_capacity(
                target_rate=target_rate,
                max_runs=max_runs,
                out_path=out,
                progress=progress,
                seed=seed,
                max_scale_out=max_scale_out,
            )
        return _plan_on_flink(
            flink,
            bar,
            progress,
            target_rate=target_rate,
            out=out,
            max_runs=max_runs,
            max_scale_out=max_scale_out,
            seed=seed,
        )


def _print_capacity_model(model: CapacityModelFile, *, on_flink: bool) -> None:
    """The model's surrogate, its runs (each one's MST on Flink), the slots for the target and some capacities."""
    table = Table(title="StreamBed capacity model", show_header=False)
    table.add_row("surrogate", model.surrogate.family)
    table.add_row("testbed runs", str(model.testbed_runs))
    if on_flink:
        for index, observation in enumerate(model.observations, start=1):
            table.add_row(
                f"run {index}: {observation['task_slots']} slots", f"MST {observation['capacity']:,.0f} rec/s"
            )
    slots = model.task_slots_for_target
    table.add_row(
        "task slots for target (110 %)",
        str(slots) if slots is not None else f"out of reach ({model.extra.get('inverse_error', 'no estimate')})",
    )
    for n in sorted(model.capacities)[:: max(1, len(model.capacities) // 8)]:
        table.add_row(f"capacity at {n}", f"{model.capacities[n]:,.0f} rec/s")
    Console().print(table)


@dataclass(frozen=True)
class _FlinkPlan:
    """The checked inputs of a plan on the real Flink testbed."""

    min_slots: int
    max_slots: int
    settings: FlinkTestbedSettings
    estimator: EstimatorSettings
    rest_url: str | None
    prometheus: str | None
    workdir: Path | None


def _flink_plan(
    *,
    min_slots: int,
    max_slots: int,
    capacity_per_slot: float,
    max_rate: float | None,
    min_rate_fraction: float,
    measure_s: int,
    rampup_s: int,
    probes: int,
    skew: float,
    seed: int,
    cluster_warmup_s: float,
    rest_url: str | None,
    prometheus: str | None,
    workdir: Path | None,
) -> _FlinkPlan:
    """The Flink options checked, or exit 2 with the one-line reason (before anything starts)."""
    from lab.flink.testbed import FlinkTestbedSettings, estimator_settings

    if not 1 <= min_slots < max_slots:
        fail(
            f"--min-slots {min_slots}, --max-slots {max_slots}: need 1 <= min < max "
            "(two budgets at least, to fit how capacity grows)"
        )
    if measure_s < 3:
        fail(f"--measure-s: at least 3 s of samples to see the backlog grow, got {measure_s}")
    if rampup_s < 1 or probes < 1:
        fail("--rampup-s and --probes must be at least 1")
    if not 0.0 <= min_rate_fraction < 1.0:
        fail(f"--min-rate-fraction: must be in [0, 1), got {min_rate_fraction:g}")
    if (rest_url is None) != (prometheus is None):
        fail("--rest-url and --prometheus go together: the existing cluster and the Prometheus that scrapes it")
    if rest_url is not None and workdir is not None:
        fail("--workdir is for a local cluster; an existing one (--rest-url) keeps its own files")
    try:
        settings = FlinkTestbedSettings(
            capacity_per_slot=capacity_per_slot,
            max_rate=max_rate,
            skew=skew,
            seed=seed,
            cluster_warmup_s=cluster_warmup_s,
        )
    except ValueError as exc:
        # The settings name the field (``max_rate: invalid value -1.0``); the user typed the flag.
        field, _, reason = str(exc).partition(":")
        fail(f"--{field.replace('_', '-')}:{reason}")
    estimator = estimator_settings(
        rampup_s=rampup_s, measure_s=measure_s, probes=probes, min_rate_fraction=min_rate_fraction
    )
    return _FlinkPlan(min_slots, max_slots, settings, estimator, rest_url, prometheus, workdir)


@dataclass
class _RunBars:
    """A bar for the cluster's warm-up, and one per testbed run: a step for its warmup and each probe."""

    bar: Progress
    phases: int
    """Steps of a run's bar: the warmup and the most probes."""
    warmup_s: float
    task: TaskID | None = None
    runs: int = 0

    def on_phase(self, event: PhaseEvent) -> None:
        """Follow the testbed: a new bar at each run's warmup, a step at each measurement."""
        if event.kind == "cluster-warmup":
            self.task = self.bar.add_task(
                f"cluster warm-up: {event.parallelism} slots at {event.rate:,.0f}/s for {self.warmup_s:g} s",
                total=1,
                unit="",
            )
        elif event.kind == "warmup":
            if self.task is not None and self.runs == 0:
                self.bar.update(self.task, completed=1)
            self.runs += 1
            self.task = self.bar.add_task(
                f"run {self.runs}: {event.parallelism} slots, warmup at {event.rate:,.0f}/s",
                total=self.phases,
                unit="phases",
            )
        elif self.task is None:
            return
        elif event.kind == "probe":
            self.bar.update(
                self.task, description=f"run {self.runs}: {event.parallelism} slots, probe at {event.rate:,.0f}/s"
            )
        else:
            self.bar.update(
                self.task,
                advance=1,
                description=f"run {self.runs}: {event.parallelism} slots, {event.rate:,.0f}/s in, "
                f"{event.achieved_rate or 0:,.0f}/s read, backlog {event.lag_growth or 0:+,.0f}/s",
            )

    def finished(self, report: RunReport) -> None:
        """Fill the run's bar and show its MST."""
        if self.task is not None:
            self.bar.update(
                self.task,
                completed=self.phases,
                description=f"run {report.index}: {report.task_slots} slots, MST {report.mst:,.0f} rec/s",
            )


def _plan_on_flink(
    plan: _FlinkPlan,
    bar: Progress,
    progress: Callable[[RunReport], None],
    *,
    target_rate: float,
    out: Path,
    max_runs: int,
    max_scale_out: int,
    seed: int,
) -> CapacityModelFile:
    """StreamBed on the trace job of a real Flink cluster (a local one unless --rest-url): a bar per testbed run."""
    import tempfile

    from lab.capacity_plan import plan_capacity
    from lab.flink.cluster import FlinkLabError
    from lab.flink.testbed import open_flink_testbed
    from models.streambed import EstimationError

    bars = _RunBars(bar, phases=1 + plan.estimator.max_iterations, warmup_s=plan.settings.cluster_warmup_s)

    def on_run(report: RunReport) -> None:
        bars.finished(report)
        progress(report)

    with tempfile.TemporaryDirectory(prefix="perdix-capacity-plan-") as scratch:
        try:
            with open_flink_testbed(
                slots=plan.max_slots,
                settings=plan.settings,
                rest_url=plan.rest_url,
                prometheus_url=plan.prometheus,
                workdir=plan.workdir or Path(scratch),
                on_phase=bars.on_phase,
            ) as bed:
                return plan_capacity(
                    target_rate=target_rate,
                    max_runs=max_runs,
                    out_path=out,
                    progress=on_run,
                    seed=seed,
                    testbed=bed,
                    min_testbed_slots=plan.min_slots,
                    max_testbed_slots=plan.max_slots,
                    memory_profiles_mb=(bed.memory_mb,),
                    production_memory_mb=bed.memory_mb,
                    max_scale_out=max_scale_out,
                    estimator=plan.estimator,
                    job_name=bed.job_name,
                    testbed_info=bed.describe(),
                )
        except (FlinkLabError, EstimationError) as exc:
            fail(str(exc))

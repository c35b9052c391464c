"""The Flink testbed's measurement and the capacity-plan command's checks, without a cluster.

A fake Prometheus (the ``PromQL`` protocol) answers the testbed's queries with a backlog that grows
at a known rate, so the measurement's arithmetic and its refusals are checked here; the real cluster
and the real Prometheus are in tests/flink/test_streambed_flink.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from lab.flink.testbed import (
    FlinkTestbed,
    FlinkTestbedError,
    FlinkTestbedRun,
    FlinkTestbedSettings,
    PhaseEvent,
)
from lab.flink.trace_job import TraceJob, TraceJobOptions
from models.streambed import is_sustainable

Series = list[tuple[dict[str, str], float]]


@dataclass
class FakePrometheus:
    """Answers by query kind: read rate, busy and back-pressured fractions per worker, a linear backlog."""

    read_rate: float
    backlog_growth: float
    busy: float = 0.99
    step_s: float = 1.0
    missing_backlog: bool = False
    queries: list[str] = field(default_factory=list)
    url: str = "http://fake-prometheus"

    def instant(self, query: str, at: float | None = None) -> Series:
        self.queries.append(query)
        if query.startswith("sum(rate(flink_taskmanager_job_task_operator_numRecordsOut"):
            return [({}, self.read_rate)]
        if "accumulateBackPressuredTimeMs" in query.split(" / ")[0]:
            return [({"tm_id": "a"}, 0.0), ({"tm_id": "b"}, 0.0)]
        if "accumulateBusyTimeMs" in query:
            return [({"tm_id": "a"}, self.busy), ({"tm_id": "b"}, self.busy)]
        if "pendingRecords" in query:
            return [] if self.missing_backlog else [({}, 100.0)]
        raise AssertionError(f"unexpected query {query}")

    def range(
        self, query: str, start: float, end: float, step_s: float = 1.0
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        assert "pendingRecords" in query, query
        points = []
        t = start
        while t <= end:
            points.append((t, 500.0 + self.backlog_growth * (t - start) + (25.0 if int(t) % 2 else -25.0)))
            t += self.step_s
        return [({}, points)]


def run_at(
    prometheus: FakePrometheus, *, rate: float, warmup: bool = False, running_s: float = 20.0
) -> tuple[FlinkTestbedRun, list[PhaseEvent]]:
    """A run of 2 slots at ``rate`` whose job started ``running_s`` ago (nothing is submitted)."""
    events: list[PhaseEvent] = []
    bed = FlinkTestbed(
        "http://unused",
        prometheus,
        FlinkTestbedSettings(),
        jar=Path("unused.jar"),
        memory_mb=900.0,
        on_phase=events.append,
    )
    options = TraceJobOptions(rate_per_s=rate, parallelism=2, epoch_ms=int((time.time() - running_s) * 1000))
    bed.job = TraceJob("http://unused", "0" * 32, options)
    return FlinkTestbedRun(bed, 2, rate=rate, warmup=warmup, started_at=time.time() - running_s), events


def test_the_backlog_growth_is_the_slope_of_the_summed_pending_records() -> None:
    prometheus = FakePrometheus(read_rate=3600.0, backlog_growth=400.0)
    run, events = run_at(prometheus, rate=4000.0)
    measured = run.measure(10)
    assert measured.seconds == 10 and measured.backlog_samples >= 10
    assert measured.lag_growth == pytest.approx(400.0, rel=0.05)  # the +-25 sawtooth averages out
    assert measured.achieved_rate == 3600.0 and measured.backpressure == 0.0
    (operator,) = measured.operators
    assert operator.parallelism == 2 and operator.true_rate_per_task == pytest.approx(3600.0 / (2 * 0.99))
    assert events[-1].kind == "measured" and events[-1].lag_growth == pytest.approx(measured.lag_growth)
    # Every query is narrowed to the job.
    assert all(f'job_id="{"0" * 32}"' in q for q in prometheus.queries)


@pytest.mark.parametrize(
    ("growth", "read", "sustained"),
    [
        (0.0, 4000.0, True),  # flat backlog, everything read
        (30.0, 3970.0, True),  # growth under 1 % of the rate: within the estimator's slack
        (80.0, 3920.0, False),  # 2 % of the rate piles up: not sustained
    ],
)
def test_sustained_means_a_backlog_that_does_not_grow(growth: float, read: float, sustained: bool) -> None:
    from lab.flink.testbed import estimator_settings

    run, _ = run_at(FakePrometheus(read_rate=read, backlog_growth=growth), rate=4000.0)
    assert is_sustainable(run.measure(10), 4000.0, estimator_settings()) is sustained


def test_a_measurement_is_refused_without_samples_or_time_or_an_overloaded_warmup() -> None:
    # Prometheus scrapes every 5 s: too few points to see a growth in 10 s.
    run, _ = run_at(FakePrometheus(read_rate=3000.0, backlog_growth=0.0, step_s=5.0), rate=3000.0)
    with pytest.raises(FlinkTestbedError, match="backlog samples"):
        run.measure(10)
    run, _ = run_at(FakePrometheus(read_rate=3000.0, backlog_growth=0.0), rate=3000.0, running_s=1.0)
    with pytest.raises(FlinkTestbedError, match="3 s of the job"):
        run.measure(10)
    # A warmup the job keeps up with says nothing about its capacity.
    run, _ = run_at(FakePrometheus(read_rate=7990.0, backlog_growth=10.0), rate=8000.0, warmup=True)
    with pytest.raises(FlinkTestbedError, match="raise the max rate"):
        run.measure(10)


def test_the_testbed_takes_one_job_wide_parallelism_at_its_own_memory() -> None:
    bed = FlinkTestbed("http://unused", FakePrometheus(1.0, 0.0), jar=Path("unused.jar"), memory_mb=900.0)
    assert bed.operator_names == ("cost",)
    with pytest.raises(FlinkTestbedError, match="one job-wide parallelism"):
        bed.deploy((1, 1), 900.0)
    with pytest.raises(FlinkTestbedError, match="TaskManagers restarted"):
        bed.deploy((1,), 2048.0)
    assert FlinkTestbedSettings(capacity_per_slot=1500.0).warmup_rate(3) == 9000.0
    assert FlinkTestbedSettings(max_rate=5000.0).warmup_rate(3) == 5000.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # one budget cannot show how capacity grows
        (["--testbed", "flink", "--min-slots", "2", "--max-slots", "2"], "need 1 <= min < max"),
        (["--testbed", "flink", "--min-slots", "0"], "need 1 <= min < max"),
        # too short to see a backlog grow
        (["--testbed", "flink", "--measure-s", "2"], "--measure-s: at least 3 s"),
        (["--testbed", "flink", "--probes", "0"], "--probes must be at least 1"),
        (["--testbed", "flink", "--capacity-per-slot", "0"], "--capacity-per-slot: invalid value 0.0"),
        (["--testbed", "flink", "--max-rate", "-1"], "--max-rate: invalid value -1.0"),
        (["--testbed", "flink", "--skew", "-1"], "--skew: invalid value -1.0"),
        (["--testbed", "flink", "--cluster-warmup-s", "-1"], "--cluster-warmup-s: invalid value -1.0"),
        (["--testbed", "flink", "--min-rate-fraction", "1"], "--min-rate-fraction: must be in [0, 1)"),
        # an existing cluster needs the Prometheus that scrapes it, and keeps its own files
        (["--testbed", "flink", "--rest-url", "http://127.0.0.1:1"], "--rest-url and --prometheus go together"),
        (
            [
                "--testbed",
                "flink",
                "--rest-url",
                "http://127.0.0.1:1",
                "--prometheus",
                "http://127.0.0.1:1",
                "--workdir",
                "/tmp",
            ],
            "--workdir is for a local cluster",
        ),
        # nothing answers there
        (
            ["--testbed", "flink", "--rest-url", "http://127.0.0.1:1", "--prometheus", "http://127.0.0.1:1"],
            "Prometheus http://127.0.0.1:1 does not answer",
        ),
        # Flink options on the simulator
        (["--skew", "1", "--rest-url", "http://x"], "--skew, --rest-url: only for --testbed flink"),
        (["--testbed", "kubernetes"], "unknown testbed 'kubernetes'"),
    ],
)
def test_bad_capacity_plan_input_is_one_line_and_exit_2(tmp_path: Path, arguments: list[str], message: str) -> None:
    out = tmp_path / "capacity.json"
    result = CliRunner().invoke(app, ["capacity-plan", "--target-rate", "1000", "--out", str(out), *arguments])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("perdix: error:")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert not out.exists()

"""The trace job's build and its Python mirror, without a cluster: javac and java on the real sources.

- lab/flink/schedule.py computes the same weights, totals and per-partition counts as the Java
  ProductionSchedule, bit for bit (the Java class prints them; fixed rate and trace mode, before and
  after the epoch, on and between trace points, past the trace and past the end of production);
- the verifier's offset ledger passes its self-check against a plain set;
- the jar is cached by the sources' hash; a compiler error, a missing javac and a bad option are one line;
- the jar builds against Flink 2.3 and 1.20 alike, each with its own source class (split reassignment on
  recovery is a 2.x API), and scripts/install-flink.sh installs the releases the lab knows.
"""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from lab.flink import trace_job
from lab.flink.cluster import FLINK_RELEASES, INSTALL_SCRIPT, flink_major
from lab.flink.schedule import ProductionSchedule, read_trace
from lab.flink.trace_job import BuildFailed, JavaToolMissing, TraceJobOptions
from tests.conftest import ROOT, TRACES
from tests.fixtures.flink import flink_home, flink_release

pytestmark = pytest.mark.both_flink_versions


@pytest.fixture(scope="module")
def home(flink_version: str) -> Path:
    """The Flink distribution of the release under test (installed on first use)."""
    return flink_home(flink_release(flink_version))


@pytest.fixture(scope="module")
def jar(home: Path) -> Path:
    """The job's jar from jobs/trace-source."""
    return trace_job.build_jar(home=home)


def java_schedule(jar: Path, args: list[str]) -> tuple[list[float], dict[tuple[int, int], tuple[float, int]]]:
    """Weights and {(at_ms, partition): (total, produced)} as the Java ProductionSchedule prints them."""
    done = subprocess.run(
        ["java", "-cp", str(jar), "perdix.jobs.ProductionSchedule", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-800:]
    weights: list[float] = []
    produced: dict[tuple[int, int], tuple[float, int]] = {}
    for line in done.stdout.splitlines():
        kind, *fields = line.split()
        if kind == "weight":
            weights.append(_from_bits(int(fields[1])))
        else:
            at, bits, partition, count = (int(f) for f in fields)
            produced[(at, partition)] = (_from_bits(bits), count)
    return weights, produced


def _from_bits(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


EPOCH = 1_700_000_000_000
CASES = [
    # (arguments, Python schedule): fixed rate over several skews, seeds and partition counts ...
    (
        ["--partitions", "12", "--skew", "1.0", "--seed", "5", "--rate", "6000"],
        lambda: ProductionSchedule.fixed_rate(6000, partitions=12, skew=1.0, seed=5, epoch_ms=EPOCH),
    ),
    (
        ["--partitions", "36", "--skew", "1.3", "--seed", "-7", "--rate", "120000.5"],
        lambda: ProductionSchedule.fixed_rate(120000.5, partitions=36, skew=1.3, seed=-7, epoch_ms=EPOCH),
    ),
    (
        ["--partitions", "7", "--skew", "0", "--seed", "9223372036854775807", "--rate", "333", "--end-s", "4.25"],
        lambda: ProductionSchedule.fixed_rate(333, partitions=7, skew=0.0, seed=2**63 - 1, epoch_ms=EPOCH, end_s=4.25),
    ),
    (
        ["--partitions", "1", "--skew", "0.37", "--seed", "0", "--rate", "1"],
        lambda: ProductionSchedule.fixed_rate(1, partitions=1, skew=0.37, seed=0, epoch_ms=EPOCH),
    ),
    # ... and the shipped traces, compressed and scaled, past their end and past the end of production.
    (
        [
            "--partitions",
            "12",
            "--skew",
            "0.8",
            "--seed",
            "3",
            "--trace",
            str(TRACES / "bank_calls.csv"),
            "--compress",
            "60",
            "--scale",
            "0.05",
            "--end-s",
            "70",
        ],
        lambda: ProductionSchedule.from_trace(
            TRACES / "bank_calls.csv",
            partitions=12,
            skew=0.8,
            seed=3,
            epoch_ms=EPOCH,
            compress=60,
            scale=0.05,
            end_s=70,
        ),
    ),
    (
        [
            "--partitions",
            "5",
            "--skew",
            "1.1",
            "--seed",
            "11",
            "--trace",
            str(TRACES / "taylor.csv"),
            "--compress",
            "7.5",
            "--scale",
            "1",
        ],
        lambda: ProductionSchedule.from_trace(
            TRACES / "taylor.csv", partitions=5, skew=1.1, seed=11, epoch_ms=EPOCH, compress=7.5
        ),
    ),
]
AT_MS = [
    EPOCH - 5000,
    EPOCH,
    EPOCH + 1,
    EPOCH + 999,
    EPOCH + 1000,
    EPOCH + 4250,
    EPOCH + 4251,
    EPOCH + 12_345,
    EPOCH + 60_000,
    EPOCH + 61_234,
    EPOCH + 69_999,
    EPOCH + 70_000,
    EPOCH + 3_600_000,
    EPOCH + 400_000_000,
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_python_schedule_matches_java_bit_for_bit(jar: Path, case: int) -> None:
    args, build = CASES[case]
    schedule = build()
    weights, produced = java_schedule(jar, [*args, "--epoch-ms", str(EPOCH), "--at-ms", ",".join(map(str, AT_MS))])
    assert list(schedule.weights) == weights
    assert math.isclose(sum(weights), 1.0, rel_tol=1e-12)
    for at in AT_MS:
        for partition in range(schedule.partitions):
            total, count = produced[(at, partition)]
            assert (schedule.total(at), schedule.produced(partition, at)) == (total, count), (at, partition)
        assert schedule.produced_all(at) == sum(produced[(at, p)][1] for p in range(schedule.partitions))


def test_schedule_shapes() -> None:
    fixed = ProductionSchedule.fixed_rate(6000, partitions=12, skew=1.0, seed=5, epoch_ms=0, end_s=10)
    assert fixed.produced_all(-1) == 0 and fixed.produced_all(0) == 0
    assert 6000 - 12 <= fixed.produced_all(1000) <= 6000
    assert fixed.produced_all(10_000) == fixed.produced_all(99_000) and fixed.rate_at(10_000) == 0.0
    assert [p for ps in fixed.owned(5) for p in ps] == sorted(range(12), key=lambda p: (p % 5, p))
    assert math.isclose(sum(fixed.reader_shares(3)), 1.0) and max(fixed.reader_shares(3)) < 0.5
    assert max(fixed.weights) == pytest.approx(1 / sum(1 / k for k in range(1, 13)))
    # Trace mode: --compress 60 replays one trace minute (one point of the shipped traces) per wall second.
    _, rates = read_trace(TRACES / "bank_calls.csv")
    trace = ProductionSchedule.from_trace(
        TRACES / "bank_calls.csv", partitions=4, skew=0, seed=0, epoch_ms=0, compress=60, scale=0.5
    )
    assert trace.rate_at(0) == 0.5 * rates[0] and trace.rate_at(1000) == 0.5 * rates[1]
    assert trace.total(1000) == pytest.approx(0.5 * (rates[0] + rates[1]) / 2)


def test_read_trace_names_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,rate\n0,10\n60,-4\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: negative or infinite rate -4"):
        read_trace(bad)
    bad.write_text("time,rate\n0,1\n")
    with pytest.raises(ValueError, match=r"bad.csv:1: the header must be time_s,rate"):
        read_trace(bad)


def test_offset_ledger_passes_its_self_check(jar: Path) -> None:
    done = subprocess.run(
        ["java", "-cp", str(jar), "perdix.jobs.SelfCheck", "3000"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok 3000", done.stdout + done.stderr[-500:]


def test_the_job_names_a_bad_argument(jar: Path) -> None:
    done = subprocess.run(
        ["java", "-cp", str(jar), "perdix.jobs.ProductionSchedule", "--rate", "10", "--skew", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "IllegalArgumentException: --skew: not a number: x" in done.stderr


def _tree(root: Path, body: str) -> Path:
    source = root / "src" / "main" / "java" / "demo" / "Demo.java"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(body)
    return root


def test_the_jar_is_cached_by_the_sources_hash(tmp_path: Path, home: Path) -> None:
    sources = _tree(tmp_path / "demo-job", "package demo;\npublic class Demo { }\n")
    cache = tmp_path / "cache"
    first = trace_job.build_jar(sources=sources, cache_dir=cache, home=home)
    built_at = first.stat().st_mtime_ns
    assert trace_job.build_jar(sources=sources, cache_dir=cache, home=home) == first
    assert first.stat().st_mtime_ns == built_at, "a cached jar was rebuilt"
    _tree(sources, "package demo;\npublic class Demo { int changed; }\n")
    second = trace_job.build_jar(sources=sources, cache_dir=cache, home=home)
    assert second != first and second.is_file()
    listing = subprocess.run(["jar", "--list", "--file", str(second)], capture_output=True, text=True, check=True)
    assert "demo/Demo.class" in listing.stdout
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, second.name]), "build leftovers in the cache"


def test_a_compiler_error_is_one_line(tmp_path: Path, home: Path) -> None:
    sources = _tree(tmp_path / "broken", "package demo;\npublic class Demo { int x = }\n")
    with pytest.raises(BuildFailed) as error:
        trace_job.build_jar(sources=sources, cache_dir=tmp_path / "cache", home=home)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("javac failed: src/main/java/demo/Demo.java:2: error: illegal start of expression"), (
        message
    )


def test_a_missing_javac_is_named(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("javac") is None
    with pytest.raises(JavaToolMissing, match=r"^javac not found on PATH: install a JDK 17"):
        trace_job.build_jar(cache_dir=tmp_path / "cache", home=home)


def test_options_are_checked_and_rendered(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of rate_per_s and trace"):
        TraceJobOptions()
    with pytest.raises(ValueError, match=r"^capacity_per_subtask: invalid value -1"):
        TraceJobOptions(rate_per_s=10, capacity_per_subtask=-1)
    with pytest.raises(ValueError, match=r"^trace: no such file"):
        TraceJobOptions(trace=tmp_path / "missing.csv")
    options = TraceJobOptions(
        trace=TRACES / "taylor.csv",
        compress=60,
        shape="split",
        epoch_ms=5,
        checkpoint_interval_s=1.5,
        cost_parallelism=3,
    )
    args = options.program_args()
    assert args[args.index("--trace") + 1] == str((TRACES / "taylor.csv").resolve())
    assert args[args.index("--compress") + 1] == "60.0" and args[args.index("--shape") + 1] == "split"
    assert (
        args[args.index("--checkpoint-interval-ms") + 1] == "1500" and args[args.index("--cost-parallelism") + 1] == "3"
    )
    assert "--rate" not in args and "--end-s" not in args


def test_the_jar_carries_the_source_class_of_its_flink_line(home: Path, jar: Path) -> None:
    """2.x: the source hands restored splits back to the enumerator (SupportsSplitReassignmentOnRecovery, which
    1.20 does not have); 1.20: the same source without it. Compiled against the other line, neither would load."""
    shown = subprocess.run(
        ["javap", "-cp", str(jar), "perdix.jobs.VersionedLogSource"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-500:]
    assert ("SupportsSplitReassignmentOnRecovery" in shown.stdout) == (flink_major(home) >= 2), shown.stdout


def test_the_install_script_installs_the_releases_the_lab_knows() -> None:
    listed = subprocess.run(["bash", str(INSTALL_SCRIPT), "--list"], capture_output=True, text=True, check=True).stdout
    releases = [line.split() for line in listed.splitlines()]
    assert releases == [[r.version, str(r.venv.relative_to(ROOT))] for r in FLINK_RELEASES.values()]
    unknown = subprocess.run(["bash", str(INSTALL_SCRIPT), "9.9"], capture_output=True, text=True, check=False)
    assert (unknown.returncode, unknown.stderr.strip()) == (
        2,
        "install-flink: unknown Flink version '9.9' (known: 2.3.0 1.20.5)",
    )

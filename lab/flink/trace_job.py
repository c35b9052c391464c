"""Build, submit and read the trace-driven log job (``jobs/trace-source``) on a real Flink cluster.

The job ships as Java source. ``build_jar`` compiles it with the JDK's ``javac`` against the jars of
the installed Flink distribution and packs it with ``jar``, into a cache directory keyed by a hash of
the sources, the JDK and the Flink jars, so it is rebuilt only when one of them changes. The sources
are ``src/main/java`` and the overlay of the distribution's major version, ``src/flink-1/java`` or
``src/flink-2/java`` (the one class whose API differs between Flink 1.20 and 2.x). ``submit``
uploads the jar through the REST API (``POST /jars/upload``, ``POST /jars/{id}/run``; no client JVM)
and waits until every subtask runs; ``submit_generator`` runs the jar's second entry point, Flink's
datagen source without a backlog (``perdix.jobs.GeneratorJob``). ``read_counts`` reads the job's own
accounting (produced, pending, verified, ahead, duplicate, lost records) from the REST API's metrics.

Every failure is one line: a missing JDK tool, the compiler's first error, the job's own argument
error as Flink reports it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from lab.flink.cluster import ROOT, FlinkLabError, flink_home, flink_major, poll, rest_get
from lab.flink.schedule import ProductionSchedule

JOB_SOURCES = ROOT / "jobs" / "trace-source"
"""The job's Maven-layout source tree (src/main/java/perdix/jobs/*.java)."""

MAIN_CLASS = "perdix.jobs.TraceSourceJob"
GENERATOR_CLASS = "perdix.jobs.GeneratorJob"
"""A second entry point in the same jar: Flink's datagen source (no FLIP-33 backlog) into the costly map."""
SOURCE_NAME = "log"
"""Name of the source operator: its vertex is ``Source: log`` (``Source:_log`` in Prometheus labels)."""

Shape = Literal["chained", "split"]


class JavaToolMissing(FlinkLabError):
    """javac or jar is not installed."""


class BuildFailed(FlinkLabError):
    """javac or jar failed; the message carries the compiler's first error."""


class SubmitFailed(FlinkLabError):
    """The cluster refused the jar or the job (the message carries Flink's root cause)."""


def default_cache_dir() -> Path:
    """Where built jars are kept: ``$PERDIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/perdix/jobs``, else
    ``~/.cache/perdix/jobs``."""
    explicit = os.environ.get("PERDIX_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "perdix" / "jobs"


# ---------------------------------------------------------------------------------------------- options


@dataclass(frozen=True, kw_only=True)
class TraceJobOptions:
    """The job's arguments, typed; ``program_args`` turns them into the job's ``--key value`` list."""

    job_name: str = "perdix-trace-source"
    partitions: int = 12
    """Partitions (splits) of the log."""
    skew: float = 1.0
    """Zipf exponent of the partition weights (0: uniform)."""
    seed: int = 0
    """Seed of the shuffle that deals the Zipf ranks to partitions."""
    rate_per_s: float | None = None
    """Fixed production rate over all partitions, records/s; exactly one of this and ``trace``."""
    trace: Path | None = None
    """A ``time_s,rate`` CSV (traces/*.csv) the production follows; read by the job at submission."""
    compress: float = 1.0
    """Trace seconds replayed per wall second (60: one trace minute per second), at the trace's rates."""
    scale: float = 1.0
    """Factor on the trace's rates."""
    epoch_ms: int | None = None
    """Wall time (Unix ms) at which production starts; None: ``submit`` sets it to the submission time."""
    end_s: float | None = None
    """Wall seconds after the epoch at which production stops (the job then drains); None: never."""
    capacity_per_subtask: float = 5000.0
    """Records/s one subtask of the costly map carries (its per-record cost is 1/capacity s); 0: no cost."""
    shape: Shape = "chained"
    """chained: source+map in one task -> verifier; split: source | map | verifier, three vertices."""
    checkpoint_interval_s: float | None = None
    """Checkpoint interval of the job; None keeps the cluster's."""
    parallelism: int = 1
    """Parallelism of every vertex at submission (the per-vertex values below override it)."""
    source_parallelism: int | None = None
    cost_parallelism: int | None = None
    verify_parallelism: int | None = None
    verify_max_parallelism: int | None = None
    """The verifier's max parallelism; 1 makes it a non-parallel operator (what windowAll gives)."""

    def __post_init__(self) -> None:
        if (self.rate_per_s is None) == (self.trace is None):
            raise ValueError("give exactly one of rate_per_s and trace")
        checks: list[tuple[str, bool]] = [
            ("partitions", self.partitions >= 1),
            ("skew", 0.0 <= self.skew <= 10.0),
            ("rate_per_s", self.rate_per_s is None or 0.0 <= self.rate_per_s < 1e12),
            ("compress", self.compress > 0.0 and math.isfinite(self.compress)),
            ("scale", self.scale >= 0.0 and math.isfinite(self.scale)),
            ("epoch_ms", self.epoch_ms is None or self.epoch_ms >= 0),
            ("end_s", self.end_s is None or self.end_s > 0.0),
            ("capacity_per_subtask", self.capacity_per_subtask >= 0.0),
            ("shape", self.shape in ("chained", "split")),
            ("checkpoint_interval_s", self.checkpoint_interval_s is None or self.checkpoint_interval_s >= 0.01),
            ("parallelism", self.parallelism >= 1),
            ("source_parallelism", self.source_parallelism is None or self.source_parallelism >= 1),
            ("cost_parallelism", self.cost_parallelism is None or self.cost_parallelism >= 1),
            ("verify_parallelism", self.verify_parallelism is None or self.verify_parallelism >= 1),
            ("verify_max_parallelism", self.verify_max_parallelism is None or self.verify_max_parallelism >= 1),
        ]
        for name, ok in checks:
            if not ok:
                raise ValueError(f"{name}: invalid value {getattr(self, name)!r}")
        if self.trace is not None and not Path(self.trace).is_file():
            raise ValueError(f"trace: no such file {self.trace}")

    def program_args(self) -> list[str]:
        """The job's arguments (``--key value``), with an absolute trace path (the JobManager reads it)."""
        args = [
            "--job-name",
            self.job_name,
            "--partitions",
            str(self.partitions),
            "--skew",
            repr(float(self.skew)),
            "--seed",
            str(self.seed),
            "--capacity",
            repr(float(self.capacity_per_subtask)),
            "--shape",
            self.shape,
        ]
        if self.rate_per_s is not None:
            args += ["--rate", repr(float(self.rate_per_s))]
        if self.trace is not None:
            args += [
                "--trace",
                str(Path(self.trace).resolve()),
                "--compress",
                repr(float(self.compress)),
                "--scale",
                repr(float(self.scale)),
            ]
        if self.epoch_ms is not None:
            args += ["--epoch-ms", str(self.epoch_ms)]
        if self.end_s is not None:
            args += ["--end-s", repr(float(self.end_s))]
        if self.checkpoint_interval_s is not None:
            args += ["--checkpoint-interval-ms", str(round(self.checkpoint_interval_s * 1000))]
        for flag, value in (
            ("--source-parallelism", self.source_parallelism),
            ("--cost-parallelism", self.cost_parallelism),
            ("--verify-parallelism", self.verify_parallelism),
            ("--verify-max-parallelism", self.verify_max_parallelism),
        ):
            if value is not None:
                args += [flag, str(value)]
        return args

    def schedule(self) -> ProductionSchedule:
        """The production schedule the job runs (needs ``epoch_ms``)."""
        if self.epoch_ms is None:
            raise ValueError("epoch_ms: unset; the schedule of a submitted job is TraceJob.options.schedule()")
        end_s = math.inf if self.end_s is None else self.end_s
        if self.trace is not None:
            return ProductionSchedule.from_trace(
                Path(self.trace),
                partitions=self.partitions,
                skew=self.skew,
                seed=self.seed,
                epoch_ms=self.epoch_ms,
                compress=self.compress,
                scale=self.scale,
                end_s=end_s,
            )
        assert self.rate_per_s is not None
        return ProductionSchedule.fixed_rate(
            self.rate_per_s,
            partitions=self.partitions,
            skew=self.skew,
            seed=self.seed,
            epoch_ms=self.epoch_ms,
            end_s=end_s,
        )


# ---------------------------------------------------------------------------------------------- build


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise JavaToolMissing(f"{name} not found on PATH: install a JDK 17 (Debian: openjdk-17-jdk-headless)")
    return path


def _first_error(output: str, sources: Path) -> str:
    """The compiler's first error line, paths made relative to the source tree."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    chosen = next((line for line in lines if ": error:" in line), lines[0] if lines else "no output")
    return chosen.replace(str(sources) + os.sep, "")


def build_jar(*, sources: Path = JOB_SOURCES, cache_dir: Path | None = None, home: Path | None = None) -> Path:
    """The job's jar, compiled from ``sources`` against the lib/ jars of the distribution at ``home`` (default: the
    selected release's, ``flink_release``), with the overlay of its major version; reused while nothing changed.

    The cache key hashes every .java file (path and content), ``javac -version`` and the names of
    Flink's jars. A build goes to a temporary directory first and is moved into place whole.
    """
    javac, jar = _tool("javac"), _tool("jar")
    home = home or flink_home()
    classpath = sorted((home / "lib").glob("*.jar"))
    if not classpath:
        raise FlinkLabError(f"no jars in {home / 'lib'}: the Flink distribution is incomplete")
    java_files = sorted((sources / "src" / "main" / "java").rglob("*.java"))
    if not java_files:
        raise BuildFailed(f"no Java sources under {sources / 'src' / 'main' / 'java'}")
    java_files += sorted((sources / "src" / f"flink-{flink_major(home)}" / "java").rglob("*.java"))
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    digest = hashlib.sha256()
    digest.update((version.stdout + version.stderr).encode())
    for path in classpath:
        digest.update(path.name.encode())
    for path in java_files:
        digest.update(str(path.relative_to(sources)).encode() + b"\0" + path.read_bytes() + b"\0")
    cache = cache_dir or default_cache_dir()
    target = cache / f"{sources.name}-{digest.hexdigest()[:16]}.jar"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as work:
        classes = Path(work) / "classes"
        compiled = subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-d",
                str(classes),
                "-cp",
                os.pathsep.join(str(p) for p in classpath),
                *map(str, java_files),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            raise BuildFailed(f"javac failed: {_first_error(compiled.stderr + compiled.stdout, sources)}")
        built = Path(work) / "job.jar"
        packed = subprocess.run(
            [jar, "--create", "--file", str(built), "--main-class", MAIN_CLASS, "-C", str(classes), "."],
            capture_output=True,
            text=True,
            check=False,
        )
        if packed.returncode != 0:
            raise BuildFailed(f"jar failed: {_first_error(packed.stderr + packed.stdout, sources)}")
        os.replace(built, target)
    return target


# ---------------------------------------------------------------------------------------------- submit


@dataclass(frozen=True)
class TraceJob:
    """A submitted trace job: where it runs, its id, and the options it runs with (epoch resolved)."""

    rest_url: str
    job_id: str
    options: TraceJobOptions

    def schedule(self) -> ProductionSchedule:
        """The job's production schedule (ground truth for produced records)."""
        return self.options.schedule()


def _rest_error(exc: urllib.error.HTTPError) -> str:
    """Flink's root cause from an error answer: the last ``Caused by:`` of its trace, else its first line."""
    try:
        body = json.loads(exc.read().decode(errors="replace") or "{}")
    except (ValueError, OSError):
        return f"HTTP {exc.code}"
    text = "\n".join(str(e) for e in (body.get("errors") or [])) if isinstance(body, dict) else ""
    causes = [
        line.strip()[len("Caused by: ") :] for line in text.splitlines() if line.strip().startswith("Caused by: ")
    ]
    line = causes[-1] if causes else (text.strip().splitlines() or [f"HTTP {exc.code}"])[0]
    return line[:500]


def _request(
    url: str, *, method: str, body: bytes | None = None, content_type: str | None = None, timeout_s: float = 60.0
) -> Any:
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise SubmitFailed(f"{method} {url}: {_rest_error(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SubmitFailed(f"{method} {url}: no answer: {getattr(exc, 'reason', exc)}") from None
    return json.loads(raw) if raw.strip() else None


def upload_jar(rest_url: str, jar: Path) -> str:
    """Upload ``jar`` to the cluster (``POST /jars/upload``); the jar id for /jars/{id}/run."""
    boundary = uuid.uuid4().hex
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            f'Content-Disposition: form-data; name="jarfile"; filename="{jar.name}"\r\n'.encode(),
            b"Content-Type: application/x-java-archive\r\n\r\n",
            jar.read_bytes(),
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    answer = _request(
        f"{rest_url}/jars/upload", method="POST", body=body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise SubmitFailed(f"POST {rest_url}/jars/upload: unexpected answer {answer!r}")
    return Path(str(answer["filename"])).name


def submit(
    rest_url: str,
    options: TraceJobOptions,
    *,
    jar: Path | None = None,
    running_timeout_s: float = 90.0,
    flink_configuration: dict[str, str] | None = None,
) -> TraceJob:
    """Submit the job (the epoch defaults to now) and return once every subtask is RUNNING.

    ``flink_configuration``: job-level Flink options for this submission only (``/jars/{id}/run``'s
    ``flinkConfiguration``), e.g. the RocksDB state backend and its native metrics.
    """
    if options.epoch_ms is None:
        options = replace(options, epoch_ms=int(time.time() * 1000))
    job_id = run_jar(
        rest_url,
        jar or build_jar(),
        MAIN_CLASS,
        options.program_args(),
        parallelism=options.parallelism,
        running_timeout_s=running_timeout_s,
        flink_configuration=flink_configuration,
    )
    return TraceJob(rest_url, job_id, options)


def submit_generator(
    rest_url: str,
    *,
    job_name: str,
    rate_per_s: float,
    capacity_per_subtask: float,
    parallelism: int,
    checkpoint_interval_s: float = 10.0,
    jar: Path | None = None,
    running_timeout_s: float = 90.0,
) -> str:
    """Submit ``perdix.jobs.GeneratorJob`` (Flink's rate-limited datagen source, no FLIP-33 backlog, into the
    costly map); return its job id once every subtask is RUNNING."""
    if not (rate_per_s > 0 and capacity_per_subtask > 0 and parallelism >= 1 and checkpoint_interval_s >= 0):
        raise ValueError("generator job: rate and capacity must be > 0, parallelism >= 1, checkpoint interval >= 0")
    args = [
        "--job-name",
        job_name,
        "--rate",
        f"{rate_per_s:g}",
        "--capacity",
        f"{capacity_per_subtask:g}",
        "--checkpoint-ms",
        str(round(checkpoint_interval_s * 1000)),
    ]
    return run_jar(
        rest_url,
        jar or build_jar(),
        GENERATOR_CLASS,
        args,
        parallelism=parallelism,
        running_timeout_s=running_timeout_s,
    )


def run_jar(
    rest_url: str,
    jar: Path,
    entry_class: str,
    program_args: list[str],
    *,
    parallelism: int,
    running_timeout_s: float = 90.0,
    flink_configuration: dict[str, str] | None = None,
) -> str:
    """Upload ``jar``, run ``entry_class`` with ``program_args`` and return the job id once every subtask runs.

    The upload is deleted again whatever happens (a leftover costs disk space only).
    """
    jar_id = upload_jar(rest_url, jar)
    try:
        answer = _request(
            f"{rest_url}/jars/{jar_id}/run",
            method="POST",
            body=json.dumps(
                {
                    "entryClass": entry_class,
                    "programArgsList": program_args,
                    "parallelism": parallelism,
                    **({"flinkConfiguration": dict(flink_configuration)} if flink_configuration else {}),
                }
            ).encode(),
            content_type="application/json",
        )
    finally:
        try:
            _request(f"{rest_url}/jars/{jar_id}", method="DELETE", timeout_s=10.0)
        except SubmitFailed:
            pass  # a leftover upload costs disk space only
    job_id = str((answer or {}).get("jobid") or "")
    if not job_id:
        raise SubmitFailed(f"POST {rest_url}/jars/{jar_id}/run: no job id in {answer!r}")
    wait_running(rest_url, job_id, timeout_s=running_timeout_s)
    return job_id


def wait_running(rest_url: str, job_id: str, *, timeout_s: float = 90.0) -> dict[str, Any]:
    """Poll ``/jobs/{id}`` until the job and every subtask are RUNNING; its details. SubmitFailed if it fails."""

    def running() -> dict[str, Any] | None:
        details = rest_get(f"{rest_url}/jobs/{job_id}")
        if not details:
            return None
        if details.get("state") in ("FAILED", "CANCELED", "FINISHED"):
            exceptions = rest_get(f"{rest_url}/jobs/{job_id}/exceptions") or {}
            root = str(exceptions.get("rootException") or "").strip().splitlines()
            raise SubmitFailed(f"job {job_id} is {details['state']}: {root[0] if root else 'no exception recorded'}")
        vertices = details.get("vertices") or []
        if (
            details.get("state") == "RUNNING"
            and vertices
            and all((v.get("tasks") or {}).get("RUNNING") == v.get("parallelism") for v in vertices)
        ):
            return details
        return None

    return poll(running, timeout_s=timeout_s, interval_s=0.3, what=f"job {job_id} running")


def cancel(rest_url: str, job_id: str, *, timeout_s: float = 30.0) -> None:
    """Cancel a job (``PATCH /jobs/{id}?mode=cancel``) and wait until it stopped; a job already gone is fine."""
    try:
        _request(f"{rest_url}/jobs/{job_id}?mode=cancel", method="PATCH", timeout_s=10.0)
    except SubmitFailed:
        pass  # already finished or unknown; the poll below says whether it still runs

    def stopped() -> bool:
        details = rest_get(f"{rest_url}/jobs/{job_id}")
        return details is None or details.get("state") in ("CANCELED", "FAILED", "FINISHED")

    poll(stopped, timeout_s=timeout_s, interval_s=0.2, what=f"job {job_id} cancelled")


# ---------------------------------------------------------------------------------------------- counts


@dataclass(frozen=True)
class JobCounts:
    """The job's accounting at one moment, summed over subtasks (None: no subtask reports it now)."""

    produced: int | None
    """Records produced in the partitions the running readers own (the readers' producedRecords)."""
    pending: int | None
    """Produced and not read yet (FLIP-33 pendingRecords of the readers): the consumer lag."""
    verified: int | None
    """Records the sink has checked into a gap-free per-partition prefix."""
    ahead: int | None
    """Records seen above a gap (reordered, or waiting for a lost one)."""
    duplicates: int | None
    lost: int | None


def _vertex_sums(rest_url: str, job_id: str, vertex_id: str, names: list[str]) -> dict[str, float]:
    """Sum over subtasks of the vertex's metrics whose names end with ``.NAME`` (operator metrics)."""
    available = rest_get(f"{rest_url}/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics") or []
    ids = [m["id"] for m in available if any(m["id"] == n or m["id"].endswith("." + n) for n in names)]
    if not ids:
        return {}
    query = urllib.parse.urlencode({"get": ",".join(ids), "agg": "sum"})
    values = rest_get(f"{rest_url}/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics?{query}") or []
    sums: dict[str, float] = {}
    for entry in values:
        name = str(entry["id"]).rsplit(".", 1)[-1]
        if "sum" in entry:
            sums[name] = sums.get(name, 0.0) + float(entry["sum"])
    return sums


def read_counts(rest_url: str, job_id: str) -> JobCounts:
    """The job's produced/pending/verified/ahead/duplicate/lost records from the REST API's metrics."""
    details = rest_get(f"{rest_url}/jobs/{job_id}") or {}
    names = ["producedRecords", "pendingRecords", "verifiedRecords", "aheadRecords", "duplicateRecords", "lostRecords"]
    sums: dict[str, float] = {}
    for vertex in details.get("vertices") or []:
        for name, value in _vertex_sums(rest_url, job_id, str(vertex["id"]), names).items():
            sums[name] = sums.get(name, 0.0) + value

    def count(name: str) -> int | None:
        return int(sums[name]) if name in sums else None

    return JobCounts(
        produced=count("producedRecords"),
        pending=count("pendingRecords"),
        verified=count("verifiedRecords"),
        ahead=count("aheadRecords"),
        duplicates=count("duplicateRecords"),
        lost=count("lostRecords"),
    )

"""A real Apache Flink session cluster on loopback, for the lab's benchmarks, CLI commands and the tests.

Flink comes from the PyPI package ``apache-flink`` (its ``pyflink/`` directory is a full Flink
distribution), installed by ``scripts/install-flink.sh``: 2.3 into ``.tools/flink-venv``, the 1.20 LTS
line into ``.tools/flink-venv-1.20`` (``FLINK_RELEASES``; ``$FLINK_VERSION`` picks the default). The cluster is
one JobManager on the adaptive scheduler and N TaskManagers with one slot each, checkpointing on,
and the Prometheus reporter on a port of its own per process. Configuration, logs and pid files live
in a working directory of the caller's; the installed distribution is never modified. Every process
is started with ``start-foreground`` (the scripts ``exec`` the JVM, so the pid we hold is the JVM's)
and stopped by that pid, whatever happens (``stop`` in a ``finally``, or the cluster as a context
manager; the JVMs also get SIGTERM when this process dies). Nothing sleeps blindly: every wait polls
with a deadline.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

ROOT = Path(__file__).resolve().parents[2]
FLINK_VENV = ROOT / ".tools" / "flink-venv"
"""The venv of the default release (Flink 2.3)."""
INSTALL_SCRIPT = ROOT / "scripts" / "install-flink.sh"


@dataclass(frozen=True)
class FlinkRelease:
    """A Flink release the lab and the tests run on, and the venv ``scripts/install-flink.sh`` installs it into."""

    version: str
    venv: Path

    @property
    def series(self) -> str:
        """``2.3``, ``1.20``: what ``$FLINK_VERSION`` and the tests' ids name it by."""
        return self.version.rsplit(".", 1)[0]


FLINK_RELEASES: dict[str, FlinkRelease] = {
    "2.3": FlinkRelease("2.3.0", FLINK_VENV),
    "1.20": FlinkRelease("1.20.5", ROOT / ".tools" / "flink-venv-1.20"),
}
"""By series, the newest of each on PyPI; the first is the default. scripts/install-flink.sh lists the same."""


class FlinkLabError(RuntimeError):
    """A lab Flink problem, said in one line (what is missing or what failed, and what to do)."""


class FlinkNotInstalled(FlinkLabError):
    """The Flink distribution (or Java) is not where the lab looks for it."""


class FlinkProcessExited(FlinkLabError):
    """A JobManager or TaskManager JVM of the cluster exited."""


class DeadlineExceeded(FlinkLabError, TimeoutError):
    """A wait ran out of time."""


_PORT_FLOOR = 20000
"""The lowest port free_port hands out below the kernel's ephemeral range (clear of the usual services)."""


_HANDED_OUT: set[int] = set()
"""Ports free_port has returned in this process."""


def ephemeral_port_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range for the local end of outgoing connections (Linux' default when it cannot be read)."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _bindable(port: int) -> bool:
    try:
        with socket.socket() as sock:
            sock.bind(("0.0.0.0", port))  # the wildcard: refused while any address holds the port
    except OSError:
        return False
    return True


def free_port(*, ephemeral: tuple[int, int] | None = None) -> int:
    """A TCP port nothing holds right now, chosen below the kernel's ephemeral range when there is room.

    The port is handed to another process, which binds it seconds later (a JVM's start). A port of the
    ephemeral range can meanwhile become the local end of any outgoing connection (every HTTP request of
    a test suite takes one), and Flink's Prometheus reporter then starts on no port at all, logging a
    warning only, and the TaskManager's metrics are lost. Ports below the range are never taken
    by connections; they are drawn at random (from the OS' entropy, not the ``random`` module that test
    runners seed alike in parallel processes), so two processes asking at once rarely meet.
    """
    low, _high = ephemeral or ephemeral_port_range()
    if low - _PORT_FLOOR >= 1000:
        draw = random.SystemRandom()
        for _ in range(100):
            port = draw.randrange(_PORT_FLOOR, low)
            if port not in _HANDED_OUT and _bindable(port):
                _HANDED_OUT.add(port)  # not yet bound by whoever got it: never handed out twice by this process
                return port
    with socket.socket() as sock:  # no room below the range (or all taken): any port the kernel has
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def poll(check: Callable[[], Any], *, timeout_s: float, interval_s: float = 0.2, what: str = "condition") -> Any:
    """Call ``check`` until it returns a truthy value and return that; DeadlineExceeded after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise DeadlineExceeded(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)  # polling interval, bounded by the deadline


def rest_get(url: str, timeout_s: float = 2.0) -> Any:
    """JSON of a GET, or None when nothing (or an error) answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def flink_release(version: str | None = None) -> FlinkRelease:
    """The release ``version`` names (a series such as ``1.20`` or a full version), else ``$FLINK_VERSION``'s, else
    the default; FlinkLabError naming the known ones for any other."""
    wanted = version or os.environ.get("FLINK_VERSION") or next(iter(FLINK_RELEASES))
    for release in FLINK_RELEASES.values():
        if wanted in (release.series, release.version):
            return release
    known = ", ".join(r.series for r in FLINK_RELEASES.values())
    raise FlinkLabError(f"unknown Flink version {wanted!r} (FLINK_VERSION or the version asked for): known: {known}")


def flink_version(home: Path) -> str:
    """The version of the distribution at ``home``, from its ``lib/flink-dist-VERSION.jar``."""
    jars = sorted((home / "lib").glob("flink-dist-*.jar"))
    if len(jars) != 1:
        raise FlinkNotInstalled(f"expected one lib/flink-dist-*.jar in {home}, found {len(jars)}")
    return jars[0].name[len("flink-dist-") : -len(".jar")]


def flink_major(home: Path) -> int:
    """The major version of the distribution at ``home`` (1 or 2): where its APIs and configuration differ."""
    return int(flink_version(home).split(".", 1)[0])


def venv_python(home: Path) -> Path:
    """The python of the venv whose pyflink package holds the distribution at ``home`` (PyFlink jobs run on it)."""
    for parent in home.parents:
        if (parent / "pyvenv.cfg").is_file():
            return parent / "bin" / "python"
    raise FlinkNotInstalled(f"{home} is not inside a virtual environment's pyflink package")


def flink_python(venv: Path | None = None) -> Path:
    """The Flink venv's python (default: the selected release's); FlinkNotInstalled when not installed there."""
    venv = venv or flink_release().venv
    python = venv / "bin" / "python"
    if not python.exists() or not list(venv.glob(".installed-*")):
        raise FlinkNotInstalled(f"Flink is not installed in {venv}: run scripts/install-flink.sh (or `make test`)")
    return python


def flink_home(venv: Path | None = None) -> Path:
    """The Flink distribution inside the installed pyflink package (bin/, lib/, plugins/); default: the selected
    release's (``flink_release``)."""
    venv = venv or flink_release().venv
    python = flink_python(venv)
    found = subprocess.run(
        [str(python), "-c", "import os, pyflink; print(os.path.dirname(pyflink.__file__))"],
        capture_output=True,
        text=True,
        check=False,
    )
    home = Path(found.stdout.strip())
    if found.returncode != 0 or not (home / "bin" / "jobmanager.sh").exists():
        raise FlinkNotInstalled(f"no Flink distribution in the pyflink package of {venv}: run scripts/install-flink.sh")
    return home


def install_flink(release: FlinkRelease | None = None) -> None:
    """Run scripts/install-flink.sh for ``release`` (default: the selected one; a no-op when it is installed);
    FlinkLabError with the script's last line on failure."""
    release = release or flink_release()
    done = subprocess.run(["bash", str(INSTALL_SCRIPT), release.version], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise FlinkLabError(f"scripts/install-flink.sh failed: {lines[-1]}")


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the parent dies, so no JVM outlives a killed run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class FlinkProcess:
    """One JVM of the cluster."""

    role: str
    process: subprocess.Popen[bytes]
    metrics_port: int
    log: Path


@dataclass
class FlinkCluster:
    """A loopback session cluster: one JobManager (adaptive scheduler), ``taskmanagers`` one-slot TaskManagers, on
    the Flink release whose distribution ``home`` is (default: ``flink_release()``'s)."""

    workdir: Path
    taskmanagers: int = 3
    checkpoint_interval_s: int = 5
    extra_config: dict[str, Any] = field(default_factory=dict)
    """Overrides of config(); a None value drops the key, so Flink's own default applies."""
    home: Path = field(default_factory=flink_home)
    rest_port: int = field(default_factory=free_port)
    reporter_timeout_s: float = 20.0
    """How long start() waits for a process's Prometheus reporter to answer once the TaskManagers registered."""
    processes: list[FlinkProcess] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)

    @property
    def version(self) -> str:
        """The Flink version the cluster runs (its distribution's)."""
        return flink_version(self.home)

    @property
    def rest_url(self) -> str:
        """Base URL of the JobManager's REST API."""
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def conf_dir(self) -> Path:
        """The cluster's own configuration directory."""
        return self.workdir / "conf"

    @property
    def metrics_targets(self) -> list[str]:
        """host:port of every process's Prometheus reporter, for a scrape config."""
        return [f"127.0.0.1:{p.metrics_port}" for p in self.processes]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ configuration

    def config(self) -> dict[str, Any]:
        """The cluster's config.yaml, flat keys; small memory, loopback, adaptive scheduler."""
        shipped = yaml.safe_load((self.home / "conf" / "config.yaml").read_text()) or {}
        java_opts = (((shipped.get("env") or {}).get("java") or {}).get("opts") or {}).get("all", "")
        config: dict[str, Any] = {
            # The distribution's own JVM flags (module opens Flink needs on Java 17) plus a small, fast JVM.
            "env.java.opts.all": f"{java_opts} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k",
            "env.log.dir": str(self.workdir / "log"),
            "env.pid.dir": str(self.workdir / "pid"),
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": free_port(),
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.memory.process.size": "800m",
            "jobmanager.scheduler": "adaptive",
            "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "1 s",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": 1,
            "taskmanager.memory.process.size": "900m",
            "taskmanager.memory.managed.size": "32m",
            "taskmanager.memory.network.min": "32m",
            "taskmanager.memory.network.max": "32m",
            "taskmanager.memory.jvm-metaspace.size": "192m",
            "taskmanager.memory.jvm-overhead.min": "96m",
            "execution.checkpointing.interval": f"{self.checkpoint_interval_s} s",
            "parallelism.default": 1,
            "metrics.reporter.prom.factory.class": "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
            # Every process gets its own free port through -D (see _start); this range is the fallback.
            "metrics.reporter.prom.port": "29249-29299",
            "metrics.reporter.prom.interval": "1 s",
            "heartbeat.interval": "2 s",
            "heartbeat.timeout": "20 s",
            # Fresh metrics in the REST API (the default refreshes them every 10 s).
            "metrics.fetcher.update-interval": "1 s",
            # The JobManager's metric fetcher asks every TaskManager and starts no new round until all have
            # answered or timed out, with this timeout (default 10 min): after a TaskManager crash every
            # metric the REST API serves froze for minutes while the job ran on (the crash test's drain saw
            # the counts of the moment of the crash while Prometheus saw every record verified).
            "web.timeout": "10 s",
            "web.submit.enable": True,
            "web.cancel.enable": True,
        }
        config.update(self._version_config())
        config.update(self.extra_config)
        return {key: value for key, value in config.items() if value is not None}

    def _version_config(self) -> dict[str, Any]:
        """The keys whose names differ between Flink 1.20 and 2.x: rescale as soon as asked (no cooldown, no
        waiting for more resources than are there) and fresh job details on every read (the default caches
        them 3 s), so a rescale is seen at once."""
        if flink_major(self.home) < 2:
            return {
                "jobmanager.adaptive-scheduler.scaling-interval.min": "0 s",  # 2.x: executing.cooldown-after-rescaling
                "web.refresh-interval": 200,  # 1.20 caches the execution graph for the web UI's refresh interval (ms)
            }
        return {
            "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "0 s",
            "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "1 s",
            "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout": "1 s",
            "jobmanager.adaptive-scheduler.rescale-trigger.max-delay": "1 s",
            "rest.cache.execution-graph.timeout": "200 ms",
        }

    def write_config(self) -> None:
        """Write config.yaml and the log4j files into the cluster's own conf dir."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("log", "pid"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "config.yaml").write_text(yaml.safe_dump(self.config(), sort_keys=True))
        log4j = (
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FileAppender\n"
            "appender.file.name = FileAppender\n"
            "appender.file.type = FILE\n"
            "appender.file.append = false\n"
            "appender.file.fileName = ${sys:log.file}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = %d{HH:mm:ss,SSS} %-5p %-40c{1.} - %m%n\n"
            "logger.akka.name = org.apache.pekko\n"
            "logger.akka.level = WARN\n"
        )
        for name in ("log4j-console.properties", "log4j-cli.properties", "log4j.properties"):
            (self.conf_dir / name).write_text(log4j)

    def env(self) -> dict[str, str]:
        """Environment for Flink's scripts: our conf, logs and pids; the flink venv's python for PyFlink."""
        env = dict(os.environ)
        python = str(venv_python(self.home))
        env.update(
            FLINK_CONF_DIR=str(self.conf_dir),
            FLINK_LOG_DIR=str(self.workdir / "log"),
            FLINK_PID_DIR=str(self.workdir / "pid"),
            PYFLINK_CLIENT_EXECUTABLE=python,
            PYFLINK_EXECUTABLE=python,
        )
        env.pop("FLINK_HOME", None)
        env.pop("PYTHONPATH", None)
        return env

    # ------------------------------------------------------------------ processes

    def _start(self, role: str, script: str, metrics_port: int | None = None) -> FlinkProcess:
        port = metrics_port or free_port()
        log = self.workdir / "log" / f"{role}.out"
        # The scripts name the log file after FLINK_IDENT_STRING and a count of the pid file's lines, which
        # processes started together read alike: without an ident of their own they wrote over one file.
        env = {**self.env(), "FLINK_IDENT_STRING": role}
        with log.open("ab") as out:
            process = subprocess.Popen(
                [
                    "bash",
                    str(self.home / "bin" / script),
                    "start-foreground",
                    "-D",
                    f"metrics.reporter.prom.port={port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.workdir,
                # Before exec, no thread of ours runs in the child: the fork-and-threads hazard does not apply.
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        proc = FlinkProcess(role, process, port, log)
        self.processes.append(proc)
        return proc

    def start(self, timeout_s: float = 90.0) -> Self:
        """Start the JobManager and the TaskManagers; return once all are registered and every reporter answers.

        A TaskManager whose Prometheus reporter is silent is replaced (see add_taskmanager); a silent
        JobManager fails the start. A start that fails stops whatever it started before raising.
        """
        try:
            self.write_config()
            self._start("jobmanager", "jobmanager.sh")
            # The TaskManagers retry the registration, so they start at once (the JVMs start in parallel).
            for index in range(self.taskmanagers):
                self._start(f"taskmanager-{index}", "taskmanager.sh")

            def registered() -> bool:
                self.check_alive()
                overview = rest_get(f"{self.rest_url}/overview")
                return bool(overview) and overview.get("taskmanagers") == self.taskmanagers

            poll(registered, timeout_s=timeout_s, interval_s=0.5, what=f"{self.taskmanagers} registered TaskManagers")
            silent = [p for p in self.processes if not self.await_reporter(p)]
            for proc in silent:
                if proc.role == "jobmanager":
                    raise FlinkLabError(
                        f"the JobManager's Prometheus reporter does not answer on port {proc.metrics_port}; "
                        f"log tail: {self.log_tail(proc, 5)!r}"
                    )
                self.kill(proc.role)
                self.add_taskmanager()
            if silent:  # a killed TaskManager holds its slot until its heartbeat times out
                poll(registered, timeout_s=timeout_s, interval_s=0.5, what=f"{self.taskmanagers} TaskManagers again")
        except BaseException:
            self.stop()
            raise
        return self

    def await_reporter(self, proc: FlinkProcess) -> bool:
        """Whether the process's Prometheus reporter serves its role's metrics within ``reporter_timeout_s``.

        The reporter starts before the process registers; one whose port was taken in the meantime logs a
        warning and reports nowhere, while the process runs on.
        """
        url = f"http://127.0.0.1:{proc.metrics_port}/metrics"
        # Its own metrics: another process's reporter on the same port must not pass for this one.
        own = b"flink_jobmanager_" if proc.role == "jobmanager" else b"flink_taskmanager_"

        def serving() -> bool:
            self.check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2.0) as response:
                    return own in response.read()
            except (urllib.error.URLError, OSError):
                return False

        try:
            poll(serving, timeout_s=self.reporter_timeout_s, interval_s=0.3, what=f"the reporter of {proc.role}")
        except DeadlineExceeded:
            return False
        return True

    def add_taskmanager(self, *, timeout_s: float = 60.0) -> FlinkProcess:
        """Start one more TaskManager (a replacement after ``kill``); return it once registered and reporting.

        One whose Prometheus reporter stays silent is killed and another started in its place, once;
        FlinkLabError if that one is silent too.
        """

        def ids() -> set[str]:
            return {
                str(tm.get("id")) for tm in (rest_get(f"{self.rest_url}/taskmanagers") or {}).get("taskmanagers", [])
            }

        silent: list[FlinkProcess] = []
        while len(silent) < 2:
            # A killed TaskManager stays registered until its heartbeat times out: wait for a new id, not a count.
            before = ids()
            # A new name, never one of a killed TaskManager's: its logs and port stay its own.
            index = len(list((self.workdir / "log").glob("taskmanager-*.out")))
            proc = self._start(f"taskmanager-{index}", "taskmanager.sh")

            def registered() -> bool:
                self.check_alive()
                return bool(ids() - before)  # noqa: B023 - polled within this iteration

            poll(registered, timeout_s=timeout_s, interval_s=0.3, what=f"TaskManager {proc.role} registered")
            if self.await_reporter(proc):
                return proc
            silent.append(proc)
            self.kill(proc.role)
        raise FlinkLabError(
            "the Prometheus reporters of "
            + " and ".join(f"{p.role} (port {p.metrics_port})" for p in silent)
            + f" did not answer; log tail: {self.log_tail(silent[-1], 5)!r}"
        )

    def kill(self, role: str) -> None:
        """SIGKILL one process of the cluster by its pid, as a crash would end it, and forget it."""
        proc = next((p for p in self.processes if p.role == role), None)
        if proc is None:
            raise FlinkLabError(f"no process {role} in this cluster ({', '.join(p.role for p in self.processes)})")
        proc.process.kill()
        proc.process.wait(timeout=10)
        self.processes.remove(proc)

    def check_alive(self) -> None:
        """FlinkProcessExited (with the log's last lines) if any JVM of the cluster has exited."""
        for proc in self.processes:
            if proc.process.poll() is not None:
                raise FlinkProcessExited(
                    f"Flink {proc.role} exited with {proc.process.returncode}; log tail: {self.log_tail(proc, 5)!r}"
                )

    def log_tail(self, proc: FlinkProcess, lines: int = 15) -> str:
        """Last lines of a process's logs, for failure messages."""
        texts = []
        for path in [proc.log, *sorted((self.workdir / "log").glob(f"flink-{proc.role}-*.log"))]:
            try:
                texts.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                continue
        return "\n".join(texts)

    def stop(self) -> None:
        """Stop every process this cluster started, by pid: SIGTERM, then SIGKILL after 15 s."""
        for proc in self.processes:
            if proc.process.poll() is None:
                proc.process.send_signal(signal.SIGTERM)
        for proc in self.processes:
            try:
                proc.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.process.kill()
                proc.process.wait(timeout=5)
        self.processes.clear()

    # ------------------------------------------------------------------ jobs

    def job(self, job_id: str) -> dict[str, Any] | None:
        """GET /jobs/{id}, or None."""
        return rest_get(f"{self.rest_url}/jobs/{job_id}")

    def wait_running(
        self, job_id: str, parallelism: int | Mapping[str, int] | None, *, timeout_s: float = 60.0
    ) -> dict[str, Any]:
        """Poll until the job is RUNNING with every subtask RUNNING; return the job's details.

        ``parallelism``: one for every vertex, or per vertex name (vertices not named: any), or None (any).
        """

        def wanted(vertex: Mapping[str, Any]) -> bool:
            if parallelism is None:
                return True
            if isinstance(parallelism, int):
                return bool(vertex.get("parallelism") == parallelism)
            target = parallelism.get(str(vertex.get("name")))
            return target is None or vertex.get("parallelism") == target

        def running() -> dict[str, Any] | None:
            self.check_alive()
            details = self.job(job_id)
            if not details or details.get("state") != "RUNNING":
                return None
            vertices = details.get("vertices") or []
            if vertices and all(
                v.get("status") == "RUNNING"
                and (v.get("tasks") or {}).get("RUNNING") == v.get("parallelism")
                and wanted(v)
                for v in vertices
            ):
                return details
            return None

        return poll(running, timeout_s=timeout_s, interval_s=0.3, what=f"job {job_id} running at {parallelism}")

    def cancel(self, job_id: str, *, timeout_s: float = 30.0) -> None:
        """Cancel a job and wait until it has stopped (best effort if REST is down)."""
        request = urllib.request.Request(f"{self.rest_url}/jobs/{job_id}?mode=cancel", method="PATCH")
        try:
            urllib.request.urlopen(request, timeout=5).close()
        except (urllib.error.URLError, OSError):
            return

        def gone() -> bool:
            details = self.job(job_id)
            return details is None or details.get("state") in ("CANCELED", "FAILED", "FINISHED")

        poll(gone, timeout_s=timeout_s, interval_s=0.3, what=f"job {job_id} cancelled")

"""The agent image, built by ``make image``'s script and run as the Helm chart runs it: uid 10001, a read-only root
filesystem with only /tmp writable, and here ``--network host`` to reach the loopback cluster.

The build happens in the test session (scripts/build-image.sh, the script ``make image`` runs), so a fresh
machine builds it; a missing podman/buildah or debootstrap fails the test with the script's reason. The
real check: ``perdix run --dry-run`` inside the container, its settings file mounted read-only, reads the
PyFlink job of the shared session cluster through the real Prometheus and the Flink REST API and completes
rounds with a capacity and a decision, writing nothing to the job.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.flink.agent_process import PerdixProcess
from lab.flink.harness import agent_settings, reporter_name
from tests.conftest import ROOT
from tests.fixtures.flink import FlinkCluster, poll
from tests.fixtures.prometheus import PrometheusServer
from tests.flink.proxy import RecordingProxy

pytestmark = pytest.mark.e2e

JOB_NAME = "perdix-image"
CONTAINERS_CONF = ROOT / "scripts" / "containers.conf"
RUN_AS_THE_CHART_DOES = ["--user", "10001:10001", "--read-only", "--tmpfs", "/tmp", "--network", "host"]
NOT_IN_THE_IMAGE = {"pyspark", "numba", "llvmlite", "matplotlib", "pulp"}
MAX_IMAGE_MB = 800
"""A bound that a lab or batch library sneaking back in (pyspark alone is 490 MB) would break."""


def podman(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``podman ARGS`` with the project's containers.conf (runc, ulimits the host allows)."""
    return subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)},
    )


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image scripts/build-image.sh builds from this checkout (its name); the test fails with the
    script's reason."""
    log = tmp_path_factory.mktemp("image") / "build.log"
    started = time.monotonic()
    with log.open("w") as progress:
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-image.sh")],
            stdout=subprocess.PIPE,
            stderr=progress,
            text=True,
            cwd=ROOT,
            timeout=1500,
        )
    if result.returncode != 0:
        pytest.fail(
            f"scripts/build-image.sh exited {result.returncode}:\n" + "\n".join(log.read_text().splitlines()[-25:])
        )
    name = result.stdout.strip().splitlines()[-1]
    print(f"image {name} built in {time.monotonic() - started:.0f} s")
    return name


@pytest.fixture(scope="module")
def job_id(flink_cluster: FlinkCluster) -> Iterator[str]:
    """The PyFlink datagen job at parallelism 2, cancelled after the module."""
    job = flink_cluster.submit(name=JOB_NAME, parallelism=2, rows_per_second=3000)
    try:
        yield job
    finally:
        flink_cluster.cancel(job)


@pytest.fixture(scope="module")
def prometheus(
    flink_cluster: FlinkCluster, job_id: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """The real Prometheus scraping the cluster each second, with every source subtask's rate in it."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-image"), flink_cluster.metrics_targets)
    try:
        server.start()
        server.wait_for("flink_jobmanager_job_uptime", timeout_s=60)
        first = server.wait_for(
            f'count(flink_taskmanager_job_task_numRecordsOutPerSecond{{job_name="{reporter_name(JOB_NAME)}",'
            'task_name=~"Source.*"} > 0) == 2',
            timeout_s=90,
        )
        poll(lambda: time.time() > float(first[0]["value"][0]) + 6, timeout_s=15, what="six seconds of samples")
        yield server
    finally:
        server.stop()


class ContainerAgent(PerdixProcess):
    """``perdix run`` inside the image, run as the chart runs it, its settings file mounted read-only.

    Stopped like the daemon: SIGTERM to ``podman run``, which hands it to the container; the container (named
    after this process) is removed by name whatever happens.
    """

    def __init__(self, workdir: Path, settings: dict[str, Any], *, image: str) -> None:
        super().__init__(workdir, settings, dry_run=True)
        self.config.chmod(0o644)
        self.name = f"perdix-image-test-{os.getpid()}"
        self.args = [
            "env",
            f"CONTAINERS_CONF={CONTAINERS_CONF}",
            "podman",
            "run",
            "--rm",
            "--name",
            self.name,
            *RUN_AS_THE_CHART_DOES,
            "-v",
            f"{self.config}:/etc/perdix/perdix.yaml:ro",
            image,
            "run",
            "--config",
            "/etc/perdix/perdix.yaml",
            "--dry-run",
        ]

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM through podman; the container is removed by its name in any case."""
        try:
            return super().stop(timeout_s)
        finally:
            podman("rm", "--force", "--ignore", self.name)


def test_the_build_script_without_a_container_tool_fails_with_the_reason(tmp_path: Path) -> None:
    """A machine without podman, buildah or docker: exit 2 with one line saying how to install them."""
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-image.sh")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "PERDIX_BUILDER": "no-such-builder"},
    )
    assert result.returncode == 2 and result.stdout == "", (result.stdout, result.stderr)
    assert result.stderr.strip().splitlines() == [
        "scripts/build-image.sh: no podman, buildah or docker (no-such-builder not found): "
        "run make system-deps (scripts/install-system-deps.sh)"
    ]


def test_the_image_runs_as_uid_10001_and_reports_its_version(image: str) -> None:
    labels = json.loads(podman("image", "inspect", "--format", "{{json .Labels}}", image).stdout)
    revision = labels["org.opencontainers.image.revision"]
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", revision), labels
    commit = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", revision.removesuffix("-dirty") + "^{commit}"])
    assert commit.returncode == 0, f"{revision} is no commit of this checkout"
    version = podman("run", "--rm", *RUN_AS_THE_CHART_DOES, image, "version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"perdix 0.1.0 (revision {revision})"
    uid = podman("run", "--rm", *RUN_AS_THE_CHART_DOES, "--entrypoint", "id", image)
    assert uid.stdout.split()[0] == "uid=10001(perdix)", uid.stdout
    # Nothing but /tmp is writable.
    write = podman(
        "run",
        "--rm",
        *RUN_AS_THE_CHART_DOES,
        "--entrypoint",
        "sh",
        image,
        "-c",
        "touch /tmp/ok && ! touch /opt/perdix-app/x 2>/dev/null && ! touch /x 2>/dev/null && echo read-only",
    )
    assert write.stdout.strip() == "read-only", (write.stdout, write.stderr)


def test_the_image_holds_the_daemon_and_none_of_the_lab_or_spark(image: str) -> None:
    listed = podman("run", "--rm", *RUN_AS_THE_CHART_DOES, "--entrypoint", "pip", image, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    installed = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert "perdix" in installed and {"pmdarima", "kubernetes", "prometheus-api-client"} <= installed
    assert not installed & NOT_IN_THE_IMAGE, installed & NOT_IN_THE_IMAGE
    size_mb = int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout) / 1e6
    print(f"image {image}: {size_mb:.0f} MB uncompressed")
    assert size_mb <= MAX_IMAGE_MB, f"{image} is {size_mb:.0f} MB"


def test_perdix_run_dry_run_in_the_container_decides_on_the_real_job(
    image: str,
    prometheus: PrometheusServer,
    flink_cluster: FlinkCluster,
    job_id: str,
    proxy: RecordingProxy,
    tmp_path: Path,
) -> None:
    settings = agent_settings(
        prometheus_url=prometheus.url,
        rest_url=proxy.url,
        job_name=JOB_NAME,
        # Inside the container only /tmp is writable: the knowledge file goes there.
        knowledge_path=Path("/tmp/knowledge.json"),
        loop_interval_s=3.0,
        forecast_window_s=60,
        forecast_horizon_s=60,
        grace_period_s=0.0,
        checkpoint_interval_s=5.0,
        max_parallelism=3,
    )
    settings["prometheus"]["timeout_s"] = 5.0
    with ContainerAgent(tmp_path, settings, image=image) as agent:
        decided = agent.wait_for(
            lambda e: (
                e.get("event") == "loop"
                and e.get("outcome") == "completed"
                and e.get("capacity") is not None
                and e.get("code") is not None
            ),
            timeout_s=180,
            what="a completed round with a capacity and a decision, inside the container",
        )
        code = agent.stop()
    print("inside the container:", json.dumps(decided))
    assert code == 0, agent.tail()
    assert decided["parallelism"] == 2, decided
    assert decided["capacity"] > 0 and decided["workload_avg"] > 0, decided
    assert decided["target"] is not None and 1 <= decided["target"] <= 3, decided
    assert not any(e.get("event") == "rescale" for e in agent.events()), "a dry run rescaled"
    # The agent read the job through the REST API and never wrote to it.
    assert proxy.log and proxy.writes() == [], proxy.writes()
    assert {v["parallelism"] for v in (flink_cluster.job(job_id) or {}).get("vertices", [])} == {2}

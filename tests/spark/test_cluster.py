"""Retraining through ``spark-submit`` on a real standalone cluster writes the registry ``local[2]`` writes.

The cluster (tests/fixtures/spark_cluster.py) is one master and two one-core workers on loopback;
``spark/retrain.py`` is submitted unchanged, with Perdix's packages shipped as ``--py-files`` the way
docs/spark.md tells operators to. "The same registry" means, precisely: the same jobs and the same
committed versions (both runs publish the version given with ``--version``); every version's
``model.json`` byte for byte (canonical JSON of the fitted state, so also the same sha256 in
``_COMMITTED``); and its ``metadata.json`` key for key except ``created_at``, the wall time of the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.registry import MODEL
from spark.registry import ModelRegistry
from spark.retrain import run_spark
from spark.training import RetrainConfig
from tests.conftest import ROOT
from tests.fixtures.spark_cluster import (  # noqa: F401  (spark_cluster is a fixture)
    SparkSetupError,
    SparkStandaloneCluster,
    package_py_files,
    spark_cluster,
    venv_script,
)
from tests.spark.conftest import JOBS

VERSION = "v20261123T020000000Z"
CONFIG = RetrainConfig(residual="naive")
RUN_STAMPS = ("created_at",)
"""Metadata keys that say when a run happened, the only ones two runs on the same history may differ in."""


def registry_content(root: Path) -> dict[str, dict[str, Any]]:
    """Per ``job/version``: the metadata without :data:`RUN_STAMPS` and the model file's bytes."""
    registry = ModelRegistry(str(root))
    content: dict[str, dict[str, Any]] = {}
    for job in registry.jobs():
        for version in registry.versions(job):
            artifact = registry.load(job, version)  # verifies the checksums of the commit marker
            content[f"{job}/{version}"] = {
                "metadata": {key: value for key, value in artifact.metadata.items() if key not in RUN_STAMPS},
                "model": (root / job / version / MODEL).read_bytes(),
            }
    return content


def spark_submit(
    cluster: SparkStandaloneCluster, *, registry: Path, history: Path, py_files: Path
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master spark://...`` of spark/retrain.py for the test jobs."""
    try:
        submit = venv_script("spark-submit")
    except SparkSetupError as exc:
        raise AssertionError(str(exc)) from None
    confs = [arg for key, value in cluster.app_conf().items() for arg in ("--conf", f"{key}={value}")]
    command = [
        str(submit),
        "--master",
        cluster.master_url,
        "--py-files",
        str(py_files),
        *confs,
        str(ROOT / "spark" / "retrain.py"),
        "--history",
        str(history),
        "--registry",
        str(registry),
        "--residual",
        CONFIG.residual,
        "--version",
        VERSION,
        *[arg for job in JOBS for arg in ("--job", job)],
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=registry.parent)


def test_retrain_on_a_standalone_cluster_writes_the_registry_local_writes(
    spark: Any,
    spark_cluster: SparkStandaloneCluster,
    history: Path,
    tmp_path: Path,  # noqa: F811
) -> None:
    cluster_registry = tmp_path / "cluster-registry"
    done = spark_submit(
        spark_cluster, registry=cluster_registry, history=history, py_files=package_py_files(tmp_path / "perdix-py.zip")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for job in JOBS:
        assert f"{job}: published {VERSION}" in done.stdout, done.stdout
    assert f"({spark_cluster.master_url})" in done.stdout  # the cluster, not a local[*] fallback

    # The tasks really ran on the cluster: the application had an executor on each worker. An
    # executor that exits early is replaced by the master and the run still finishes, so a worker
    # may have run more than one (2 and 1, say; the message shows how each one ended).
    (app,) = [app for app in spark_cluster.applications() if app.get("name") == "perdix-retrain"]
    assert app.get("state") == "FINISHED", app
    executors = spark_cluster.executors_by_worker(app["id"])
    assert sorted(executors) == ["worker-0", "worker-1"] and min(executors.values()) >= 1, (
        executors,
        spark_cluster.executor_endings(app["id"]),
    )

    local_registry = tmp_path / "local-registry"
    local = run_spark(
        spark,
        history=str(history),
        registry_uri=str(local_registry),
        config=CONFIG,
        version=VERSION,
        jobs=list(JOBS),
        now=datetime(2026, 11, 23, 2, 0, tzinfo=UTC),
    )
    assert local.count("published") == len(JOBS)
    on_cluster, on_local = registry_content(cluster_registry), registry_content(local_registry)
    assert sorted(on_cluster) == sorted(f"{job}/{VERSION}" for job in JOBS)
    assert on_cluster == on_local

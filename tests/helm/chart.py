"""Helpers for the chart tests: run the real helm, split its output, find objects and containers.

helm comes from ``.tools/bin`` (installed by ``scripts/install-helm.sh``, run by ``make test``) or
from PATH. A missing helm fails the tests with a message saying how to install it; nothing is
skipped.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "perdix"
EXAMPLES = CHART / "examples"
MODES = ("application", "flinkDeployment", "taskManagers", "rest")
EXAMPLE_OF_MODE = {
    "application": "application",
    "flinkDeployment": "flink-deployment",
    "taskManagers": "task-managers",
    "rest": "rest",
}
"""The values example of each mode under helm/perdix/examples/."""
DEFAULT_EXAMPLE = "application"
"""What the tests render unless told otherwise: a bare install names no Flink image and fails by design."""
KUBE_VERSION = "1.30.0"  # the oldest Kubernetes the chart supports (Chart.yaml kubeVersion)
SETTINGS_FILE_KEY = "perdix.yaml"
HELM_TIMEOUT_S = 60


def helm_binary() -> str:
    """Path of the helm binary, or fail the test with how to install it."""
    local = ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("helm")
    if found:
        return found
    pytest.fail(
        "helm not found in .tools/bin or on PATH: run `make system-deps` (or `bash scripts/install-helm.sh`)",
        pytrace=False,
    )


@dataclass(frozen=True)
class HelmResult:
    """Exit code and output of one helm invocation."""

    returncode: int
    stdout: str
    stderr: str


def run_helm(
    command: str,
    *,
    values: dict[str, Any] | None = None,
    sets: Sequence[str] = (),
    set_strings: Sequence[str] = (),
    release: str = "perdix",
    namespace: str = "flink",
    extra: Sequence[str] = (),
    example: str | None = DEFAULT_EXAMPLE,
) -> HelmResult:
    """Run ``helm template`` or ``helm lint`` on the chart with a values dict and --set flags.

    The values of ``examples/<example>.yaml`` come first (None: the chart's bare defaults), the dict
    over them, the flags last.
    """
    helm = helm_binary()
    with tempfile.TemporaryDirectory(prefix="perdix-helm-") as tmp:
        args = [helm, command]
        if command == "template":
            args += [release, str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION]
        else:
            args += [str(CHART), "--namespace", namespace, "--strict", "--kube-version", KUBE_VERSION]
        if example is not None:
            args += ["--values", str(EXAMPLES / f"{example}.yaml")]
        if values:
            values_file = Path(tmp) / "values.yaml"
            values_file.write_text(yaml.safe_dump(values))
            args += ["--values", str(values_file)]
        for item in sets:
            args += ["--set", item]
        for item in set_strings:
            args += ["--set-string", item]
        args += list(extra)
        env = {**os.environ, "HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp}
        proc = subprocess.run(args, capture_output=True, text=True, timeout=HELM_TIMEOUT_S, env=env, check=False)
    return HelmResult(proc.returncode, proc.stdout, proc.stderr)


def render(**kwargs: Any) -> list[dict[str, Any]]:
    """``helm template`` that must succeed; returns the rendered objects (a fresh copy per call)."""
    return copy.deepcopy(_render_cached(json.dumps(kwargs, sort_keys=True)))


@functools.lru_cache(maxsize=64)
def _render_cached(kwargs_json: str) -> list[dict[str, Any]]:
    # Many tests look at the same rendering; helm runs once per distinct set of arguments.
    result = run_helm("template", **json.loads(kwargs_json))
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Objects of a kind (and name)."""
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of a kind (and name)."""
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def settings_yaml(objects: list[dict[str, Any]]) -> str:
    """The settings file the chart renders for ``perdix run --config``."""
    holders = [o for o in find(objects, "ConfigMap") if SETTINGS_FILE_KEY in o.get("data", {})]
    assert len(holders) == 1, "expected exactly one ConfigMap holding perdix.yaml"
    return str(holders[0]["data"][SETTINGS_FILE_KEY])


def pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec) for every workload that runs pods."""
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield obj, obj["spec"]["template"]["spec"]


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init and regular containers of a pod spec."""
    return list(pod.get("initContainers", [])) + list(pod["containers"])


def perdix_pod(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(workload, pod spec, container) of the one Perdix container."""
    found = [
        (workload, pod, container)
        for workload, pod in pod_templates(objects)
        for container in pod["containers"]
        if container["name"] == "perdix"
    ]
    assert len(found) == 1, f"expected one perdix container, found {len(found)}"
    return found[0]

"""The chart's install as the agent sees it: `perdix run` with the rendered settings file, under the rendered Role.

Everything the daemon gets comes from `helm template`: the settings file (verbatim, tuned only through
chart values, as an operator would), the container's args, the probe paths and port, and the Role,
which a loopback API enforces on every request (tests/helm/rbac_api.py). Real parts: Prometheus
(Debian) scraping `perdix simulate --serve-metrics`, and `perdix run` as a subprocess. The chart's
default is dry-run: a workload step leads to RescaleRecommended Events and zero writes to the scale target.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.prometheus import PrometheusServer, free_port, http_get, poll
from tests.flink.fake_rest import FakeFlinkRest, FakeJob
from tests.helm.chart import ROOT, one, perdix_pod, render, settings_yaml
from tests.helm.rbac_api import RbacAPI

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PERDIX = [sys.executable, "-m", "cli"]
NAMESPACE = "streaming"
INITIAL = 3
SIMULATOR = {
    # A small job that reacts within seconds: 1000 records/s per worker, short restarts.
    "partitions": 12,
    "initial_parallelism": INITIAL,
    "worker_capacity_rps": 1000.0,
    "metric_window_s": 2,
    "cpu_noise": 0.04,
    "checkpoint_interval_s": 5,
    "seed": 5,
}


class Process:
    """A subprocess with its output in a file, stopped by its pid."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with log.open("wb") as handle:
            self.popen = subprocess.Popen(
                args, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
            )

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait (SIGKILL if it hangs); the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        return int(self.popen.returncode)

    def tail(self, lines: int = 25) -> str:
        """The end of its output, for failure messages."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The simulated job's exporter and a Prometheus scraping it; stopped at the end."""
    trace = tmp_path / "steady.csv"
    # 40 % of the initial capacity for half a minute (capacity to learn from), then 150 %: a scale-up is due.
    trace.write_text("time_s,rate\n0,1200\n9,1200\n10,4500\n600,4500\n")
    exporter_config = tmp_path / "exporter.yaml"
    exporter_config.write_text(yaml.safe_dump({"simulator": SIMULATOR}))
    exporter_port = free_port()
    exporter = Process(
        [
            *PERDIX,
            "simulate",
            "--trace",
            str(trace),
            "--config",
            str(exporter_config),
            "--serve-metrics",
            f"127.0.0.1:{exporter_port}",
            "--speed",
            "1",
            "--log-format",
            "json",
        ],
        tmp_path / "exporter.log",
    )
    (tmp_path / "prometheus").mkdir()
    prometheus = PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{exporter_port}"])
    processes = [exporter]
    try:
        poll(
            lambda: http_get(f"http://127.0.0.1:{exporter_port}/healthz")[0] == 200,
            timeout_s=60,
            what=f"the simulator exporter\n{exporter.tail()}",
        )
        prometheus.start()
        yield {"tmp": tmp_path, "prometheus": prometheus, "processes": processes}
    finally:
        for process in processes:
            process.terminate(timeout_s=20)
        prometheus.stop()


def chart_values(prometheus_url: str, kubeconfig: Path, port: int) -> dict[str, Any]:
    """What an operator would --set for a small, fast job; dry-run stays at the chart's default (on)."""
    return {
        "perdix": {
            "loopIntervalSeconds": 2,
            "minParallelism": 1,
            "maxParallelism": 12,
            "targetRecoveryTimeSeconds": 60,
            "gracePeriodSeconds": 2,
            "checkpointIntervalSeconds": 5,
            "forecastWindowSeconds": 60,
            "forecastHorizonSeconds": 60,
            "downtimeRescalePriorSeconds": 3,
            "downtimeFailurePriorSeconds": 2,
            "prometheus": {
                "url": prometheus_url,
                "timeoutSeconds": 2,
                "staleAfterSeconds": 10,
                "rateWindowSeconds": 10,
            },
            # Outside a cluster the agent needs a kubeconfig; in a pod it uses the projected token.
            "scaleTarget": {"kubeconfig": str(kubeconfig), "requestTimeoutSeconds": 2},
            # Loopback only in tests (the chart binds all interfaces inside the pod).
            "telemetry": {"metricsHost": "127.0.0.1", "metricsPort": port, "notReadyAfterFailedLoops": 2},
        },
        "application": {"taskManager": {"replicas": INITIAL}},
    }


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig for the loopback API (plain HTTP)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "loopback", "cluster": {"server": server}}],
                "users": [{"name": "perdix", "user": {"token": "test"}}],
                "contexts": [
                    {"name": "loopback", "context": {"cluster": "loopback", "user": "perdix", "namespace": NAMESPACE}}
                ],
                "current-context": "loopback",
            }
        )
    )
    return path


def test_the_default_install_runs_ready_in_dry_run_within_its_role(world: dict[str, Any]) -> None:
    tmp: Path = world["tmp"]
    port = free_port()
    kubeconfig = tmp / "kubeconfig"
    # The Role does not depend on the endpoints, so render once to build the API that enforces it.
    values = chart_values(world["prometheus"].url, kubeconfig, port)
    objects = render(values=values, namespace=NAMESPACE)
    api = RbacAPI(one(objects, "Role")).start()
    try:
        write_kubeconfig(kubeconfig, api.url)
        taskmanagers = one(objects, "Deployment", "perdix-taskmanager")
        api.put("apps", "deployments", taskmanagers)
        api.put("", "configmaps", one(objects, "ConfigMap", "perdix-knowledge"))
        settings_file = tmp / "perdix.yaml"
        settings_file.write_text(settings_yaml(objects))
        _, _, container = perdix_pod(objects)
        probes = {name: container[name]["httpGet"]["path"] for name in ("livenessProbe", "readinessProbe")}
        assert container["ports"][0]["containerPort"] == port

        # The container's own args, with the file where the ConfigMap would be mounted.
        args = [settings_file if arg == "/etc/perdix/perdix.yaml" else arg for arg in container["args"]]
        agent = Process([*PERDIX, *map(str, args)], tmp / "agent.log")
        world["processes"].append(agent)
        base = f"http://127.0.0.1:{port}"

        def alive() -> bool:
            if agent.popen.poll() is not None:
                raise AssertionError(f"perdix run exited with {agent.popen.returncode}:\n{agent.tail()}")
            return http_get(base + probes["livenessProbe"])[0] == 200

        poll(alive, timeout_s=60, what="the liveness probe")
        poll(
            lambda: http_get(base + probes["readinessProbe"])[0] == 200,
            timeout_s=60,
            what=f"the readiness probe\n{agent.tail()}",
        )
        poll(lambda: api.events, timeout_s=90, interval_s=0.5, what=f"a RescaleRecommended Event\n{agent.tail()}")

        def recommended() -> float:
            # The Event leaves during the round; the gauge is set when the round is recorded.
            _, metrics = http_get(base + "/metrics")
            lines = [line for line in metrics.splitlines() if line.startswith("perdix_parallelism_recommended ")]
            return float(lines[0].split()[1]) if lines else float("nan")

        poll(
            lambda: recommended() > INITIAL,
            timeout_s=10,
            what="perdix_parallelism_recommended above the current scale-out",
        )
        assert agent.terminate() == 0, agent.tail()

        assert api.denied() == [], f"the rendered Role refused: {api.denied()}"
        assert not [
            r for r in api.requests if r.verb in ("patch", "update") and r.resource.startswith("deployments")
        ], "dry-run (the chart's default) wrote the scale target"
        assert api.objects[("apps", "deployments", NAMESPACE, "perdix-taskmanager")]["spec"]["replicas"] == INITIAL
        assert {event["reason"] for event in api.events} == {"RescaleRecommended"}
        assert all(event["regarding"]["name"] == "perdix-taskmanager" for event in api.events)
        knowledge = api.objects[("", "configmaps", NAMESPACE, "perdix-knowledge")]
        assert json.loads(knowledge["data"]["knowledge.json"])["version"] >= 1, "knowledge not flushed on SIGTERM"
    finally:
        api.stop()
        counts: dict[str, int] = {}
        for request in api.requests:
            verdict = "allowed" if request.allowed else "DENIED"
            key = f"{request.method} {request.group or 'core'}/{request.resource} {verdict}"
            counts[key] = counts.get(key, 0) + 1
        print("\nrequests under the rendered Role:\n" + "\n".join(f"  {n:4d}  {k}" for k, n in sorted(counts.items())))
        print("events: " + ", ".join(event["reason"] for event in api.events))


REST_URL_IN_CLUSTER = "http://orders-jobmanager.streaming.svc:8081"
"""What an operator sets in mode rest; the test swaps in its loopback Flink REST API after rendering."""


def test_mode_rest_runs_with_no_kubernetes_permission_but_its_knowledge(world: dict[str, Any]) -> None:
    """Mode rest: the agent reads the job through Flink's REST API (a loopback fake of it here), plans on the
    real Prometheus, and touches Kubernetes only for its knowledge ConfigMap, under the rendered Role."""
    tmp: Path = world["tmp"]
    port = free_port()
    kubeconfig = tmp / "kubeconfig"
    values = chart_values(world["prometheus"].url, kubeconfig, port)
    values["mode"] = "rest"
    values["perdix"]["scaleTarget"]["restUrl"] = REST_URL_IN_CLUSTER
    objects = render(values=values, namespace=NAMESPACE, example=None)
    role = one(objects, "Role")
    assert [rule["resources"] for rule in role["rules"]] == [["configmaps"]]
    flink = FakeFlinkRest(FakeJob(vertices={"a" * 32: INITIAL, "b" * 32: INITIAL}, slots_total=12)).start()
    api = RbacAPI(role).start()
    try:
        write_kubeconfig(kubeconfig, api.url)
        api.put("", "configmaps", one(objects, "ConfigMap", "perdix-knowledge"))
        rendered = settings_yaml(objects)
        assert REST_URL_IN_CLUSTER in rendered
        settings_file = tmp / "perdix.yaml"
        settings_file.write_text(rendered.replace(REST_URL_IN_CLUSTER, flink.url))
        _, _, container = perdix_pod(objects)
        args = [settings_file if arg == "/etc/perdix/perdix.yaml" else arg for arg in container["args"]]
        agent = Process([*PERDIX, *map(str, args)], tmp / "agent.log")
        world["processes"].append(agent)
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if agent.popen.poll() is not None:
                raise AssertionError(f"perdix run exited with {agent.popen.returncode}:\n{agent.tail()}")
            return http_get(base + container["readinessProbe"]["httpGet"]["path"])[0] == 200

        poll(ready, timeout_s=90, what=f"the readiness probe\n{agent.tail()}")
        poll(
            lambda: '"rescale.dry_run"' in agent.log.read_text(errors="replace"),
            timeout_s=90,
            interval_s=0.5,
            what=f"a dry-run recommendation in the log\n{agent.tail()}",
        )
        assert agent.terminate() == 0, agent.tail()

        assert flink.writes() == [], "dry-run (the chart's default) wrote to Flink's REST API"
        assert any(path.startswith("/jobs/") for _, path, _ in flink.log), "the job was never read"
        assert api.denied() == [], f"the rendered Role refused: {api.denied()}"
        assert {request.resource for request in api.requests} == {"configmaps"}
        assert api.events == []
        knowledge = api.objects[("", "configmaps", NAMESPACE, "perdix-knowledge")]
        assert json.loads(knowledge["data"]["knowledge.json"])["version"] >= 1, "knowledge not flushed on SIGTERM"
    finally:
        api.stop()
        flink.stop()

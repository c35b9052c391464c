"""The chart rendered by the real helm: lint, Kubernetes schema validity, the four modes, RBAC, pod security,
monitors."""

from __future__ import annotations

import copy
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from agent.settings import load_settings
from agent.telemetry import Telemetry, TelemetryServer
from cli import app as cli_app
from tests.helm.cases import CASES, Case, case_ids
from tests.helm.chart import (
    CHART,
    EXAMPLE_OF_MODE,
    EXAMPLES,
    MODES,
    all_containers,
    find,
    one,
    perdix_pod,
    pod_templates,
    render,
    run_helm,
    settings_yaml,
)

# Oldest supported and newest schemas kubernetes-validate ships.
KUBE_SCHEMA_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module", params=CASES, ids=case_ids())
def rendered(request: pytest.FixtureRequest) -> tuple[Case, list[dict[str, Any]]]:
    """Each case rendered once for the whole module."""
    case: Case = request.param
    return case, render(**case.render_kwargs())


def load_rendered_settings(objects: list[dict[str, Any]], tmp_path: Path) -> Any:
    """The rendered settings file, loaded by the agent's own loader."""
    path = tmp_path / "perdix.yaml"
    path.write_text(settings_yaml(objects))
    return load_settings(path)


@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_helm_lint_strict_passes(case: Case) -> None:
    result = run_helm("lint", values=case.values, namespace=case.namespace, example=case.example)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


PROMETHEUS_OPERATOR_KINDS = ("ServiceMonitor", "PodMonitor")
"""CRDs kubernetes-validate has no schema for; test_monitors_scrape_what_they_should checks them."""


def test_every_object_is_valid_kubernetes(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    assert objects
    for obj in objects:
        if obj["kind"] in PROMETHEUS_OPERATOR_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        for version in KUBE_SCHEMA_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for Kubernetes {version}: {exc.message}")


def test_validator_rejects_a_broken_object() -> None:
    """Control: the strict validation above does catch a misspelled field and a wrong type."""
    deployment = copy.deepcopy(one(render(), "Deployment", "perdix-jobmanager"))
    deployment["spec"]["template"]["spec"]["containers"][1]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_SCHEMA_VERSIONS[0], strict=True)
    deployment = copy.deepcopy(one(render(), "Deployment", "perdix-jobmanager"))
    deployment["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_SCHEMA_VERSIONS[0], strict=True)


def test_objects_live_in_the_release_or_target_namespace(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    dashboard_namespace = case.values.get("grafanaDashboard", {}).get("namespace")
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in ("Role", "RoleBinding") or obj["metadata"]["name"] == case.knowledge_configmap:
            assert namespace == case.target_namespace, obj["metadata"]["name"]
        elif obj["metadata"]["name"].endswith("-dashboard"):
            assert namespace == dashboard_namespace
        else:
            assert namespace == case.namespace, f"{obj['kind']}/{obj['metadata']['name']}"


def test_selectors_match_their_pods(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    pod_labels = []
    for workload, _ in pod_templates(objects):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items(), workload["metadata"]["name"]
        for key, value in case.values.get("podLabels", {}).items():
            if not key.startswith("app.kubernetes.io/"):
                assert labels[key] == value
        pod_labels.append(labels)
    for service in find(objects, "Service"):
        selector = service["spec"]["selector"].items()
        assert sum(selector <= labels.items() for labels in pod_labels) == 1, service["metadata"]["name"]


def test_flink_pods_announce_the_reporter_port(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    for workload, _ in pod_templates(objects):
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        for key, value in case.values.get("podAnnotations", {}).items():
            if not key.startswith("prometheus.io/"):
                assert annotations[key] == value
        if workload["metadata"]["name"].endswith(("-jobmanager", "-taskmanager")):
            assert annotations["prometheus.io/scrape"] == "true"
            assert annotations["prometheus.io/port"] == str(
                case.values.get("application", {}).get("prometheusReporterPort", 9250)
            )


# ---- RBAC ---------------------------------------------------------------------------------------


def flatten_rules(role: dict[str, Any]) -> frozenset[tuple[str, str, str, str]]:
    """A Role's rules as (apiGroup, resource, resourceName or '*', verb) tuples."""
    out = set()
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for name in rule.get("resourceNames", ["*"]):
                    for verb in rule["verbs"]:
                        out.add((group, resource, name, verb))
    return frozenset(out)


def test_rbac_is_exactly_least_privilege(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    assert not find(objects, "ClusterRole") and not find(objects, "ClusterRoleBinding")
    if case.expected_rules is None:
        assert not find(objects, "Role") and not find(objects, "RoleBinding")
        return
    role = one(objects, "Role")
    assert flatten_rules(role) == case.expected_rules
    # No wildcards anywhere, and every rule on a named object names it.
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        if "events" not in rule["resources"]:
            assert len(rule["resourceNames"]) == 1
    binding = one(objects, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": case.service_account, "namespace": case.namespace}
    ]


def test_rbac_and_settings_name_the_same_objects(rendered: tuple[Case, list[dict[str, Any]]], tmp_path: Path) -> None:
    case, objects = rendered
    settings = load_rendered_settings(objects, tmp_path)
    assert (settings.scale_target.kind, settings.scale_target.name, settings.scale_target.namespace) == (
        case.target_kind,
        case.target_name,
        case.target_namespace,
    )
    role = find(objects, "Role")
    granted = {name for (_, resource, name, _) in (flatten_rules(role[0]) if role else ()) if resource != "events"}
    expected = {settings.scale_target.name} if settings.scale_target.kind != "flink-rest" else set()
    if settings.knowledge.store == "configmap":
        expected.add(settings.knowledge.configmap)
        knowledge = one(objects, "ConfigMap", settings.knowledge.configmap)
        # Created empty and kept: the chart never overwrites or deletes what the agent learned.
        assert "data" not in knowledge
        assert knowledge["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    else:
        assert case.knowledge_configmap is None
    assert granted == expected


def test_service_account(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    _, pod, _ = perdix_pod(objects)
    assert pod["serviceAccountName"] == case.service_account
    accounts = find(objects, "ServiceAccount")
    if case.values.get("serviceAccount", {}).get("create", True):
        assert [a["metadata"]["name"] for a in accounts] == [case.service_account]
        assert accounts[0]["automountServiceAccountToken"] is False
    else:
        assert accounts == []


def test_rbac_can_be_left_to_the_platform() -> None:
    objects = render(values={"rbac": {"create": False}})
    assert not find(objects, "Role") and not find(objects, "RoleBinding")


# ---- pod security -------------------------------------------------------------------------------


def test_every_pod_runs_locked_down(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    pods = list(pod_templates(objects))
    assert pods
    for workload, pod in pods:
        where = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert pod["automountServiceAccountToken"] is False, where
        assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")), where
        assert not any("hostPath" in volume for volume in pod.get("volumes", [])), where
        for container in all_containers(pod):
            name = f"{where}/{container['name']}"
            security = container["securityContext"]
            assert security["runAsNonRoot"] is True, name
            assert security["runAsUser"] > 0, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security.get("privileged", False) is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][bound]), f"{name} {bound}"


def test_only_the_perdix_container_holds_the_token(rendered: tuple[Case, list[dict[str, Any]]]) -> None:
    case, objects = rendered
    # Flink's REST API with the knowledge in a file: the agent never calls Kubernetes, so it holds no token.
    needs_token = case.expected_rules is not None
    for workload, pod in pod_templates(objects):
        for container in all_containers(pod):
            mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
            if container["name"] == "perdix" and needs_token:
                assert mounts[TOKEN_PATH]["readOnly"] is True
                volume = next(v for v in pod["volumes"] if v["name"] == mounts[TOKEN_PATH]["name"])
                sources = volume["projected"]["sources"]
                assert any("serviceAccountToken" in source for source in sources)
            else:
                assert TOKEN_PATH not in mounts, f"{workload['metadata']['name']}/{container['name']}"


def test_perdix_probes_and_writable_paths(rendered: tuple[Case, list[dict[str, Any]]], tmp_path: Path) -> None:
    _, objects = rendered
    settings = load_rendered_settings(objects, tmp_path)
    _, pod, container = perdix_pod(objects)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["perdix-metrics"] == settings.telemetry.metrics_port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "perdix-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "perdix-metrics"}
    assert container["args"] == ["run", "--config", "/etc/perdix/perdix.yaml"]
    # The root filesystem is read-only: /tmp and (file store) the knowledge directory are emptyDirs.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    config_volume = volumes[mounts["/etc/perdix"]]
    assert config_volume["configMap"]["name"] in {o["metadata"]["name"] for o in find(objects, "ConfigMap")}
    if settings.knowledge.store == "file":
        assert "emptyDir" in volumes[mounts[str(settings.knowledge.path.parent)]]
    if settings.capacity_prior_path is not None:
        assert str(settings.capacity_prior_path.parent) in mounts


def test_probes_are_served_by_the_real_agent_server(tmp_path: Path) -> None:
    """The probe paths the chart renders exist on the agent's TelemetryServer (liveness up, readiness
    honestly not ready before a round has completed with data)."""
    objects = render()
    settings = load_rendered_settings(objects, tmp_path)
    _, _, container = perdix_pod(objects)
    telemetry = Telemetry(
        CollectorRegistry(), not_ready_after_failed_loops=settings.telemetry.not_ready_after_failed_loops
    )
    server = TelemetryServer(telemetry, host="127.0.0.1", port=0).start()  # any free port: 9249 may be taken here
    try:
        expected = {"startupProbe": 200, "livenessProbe": 200, "readinessProbe": 503}
        for probe, status in expected.items():
            path = container[probe]["httpGet"]["path"]
            try:
                with urllib.request.urlopen(server.url + path, timeout=5) as response:
                    code = response.status
            except urllib.error.HTTPError as exc:
                code = exc.code
            assert code == status, f"{probe} {path}: HTTP {code}"
    finally:
        server.stop()


def test_container_args_are_a_perdix_command() -> None:
    """The chart's `run --config FILE` parses as the real CLI's daemon command."""
    _, _, container = perdix_pod(render())
    result = CliRunner().invoke(cli_app, [*container["args"], "--help"])
    assert result.exit_code == 0, result.output
    assert "--config" in result.output


def test_probe_port_follows_the_telemetry_setting() -> None:
    objects = render(sets=["perdix.telemetry.metricsPort=9311"])
    _, _, container = perdix_pod(objects)
    assert container["ports"][0]["containerPort"] == 9311
    service = one(objects, "Service", "perdix-metrics")
    assert service["spec"]["ports"][0]["port"] == 9311
    assert service["spec"]["publishNotReadyAddresses"] is True  # scrapeable while not ready
    assert service["metadata"]["annotations"]["prometheus.io/port"] == "9311"


# ---- the four modes -----------------------------------------------------------------------------


def flink_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The rendered Flink configuration (config.yaml of the flink-conf ConfigMap)."""
    conf = one(
        objects,
        "ConfigMap",
        next(o["metadata"]["name"] for o in objects if o["metadata"]["name"].endswith("-flink-conf")),
    )
    parsed = yaml.safe_load(conf["data"]["config.yaml"])
    assert isinstance(parsed, dict)
    return parsed


APPLICATION = [case for case in CASES if case.mode == "application"]
OWN_POD = [case for case in CASES if case.mode != "application"]


def test_every_mode_has_an_example_rendered_here() -> None:
    examples = {path.stem for path in EXAMPLES.glob("*.yaml")}
    assert examples == set(EXAMPLE_OF_MODE.values()), "one values example per mode, and no other"
    for mode, example in EXAMPLE_OF_MODE.items():
        assert yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())["mode"] == mode
        assert any(case.example == example and case.mode == mode for case in CASES), f"no case renders {example}.yaml"
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["mode"]["enum"] == list(MODES)


def test_a_bare_install_names_no_image_that_cannot_be_pulled() -> None:
    """No Flink image is a default: mode application without one fails, naming the value and the way out."""
    result = run_helm("template", example=None)
    assert result.returncode != 0
    assert "application.image.repository is required in mode application" in result.stderr
    assert "examples/application.yaml" in result.stderr
    # Every other mode runs only the Perdix image, which `make image` builds as perdix:<appVersion>.
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    for case in OWN_POD:
        images = {c["image"] for _, pod in pod_templates(render(**case.render_kwargs())) for c in all_containers(pod)}
        assert images == {f"perdix:{chart['appVersion']}"}, case.id
    assert chart["appVersion"] == "0.1.0"


@pytest.mark.parametrize("case", APPLICATION, ids=[case.id for case in APPLICATION])
def test_application_mode_is_a_reactive_cluster_with_the_sidecar(case: Case, tmp_path: Path) -> None:
    objects = render(**case.render_kwargs())
    settings = load_rendered_settings(objects, tmp_path)
    conf = flink_config(objects)
    assert conf["scheduler-mode"] == "reactive"
    assert conf["taskmanager.numberOfTaskSlots"] == 1  # parallelism == TaskManagers
    assert conf["execution.checkpointing.interval"] == f"{round(settings.checkpoint_interval_s * 1000)}ms"
    assert conf["metrics.reporter.prom.factory.class"].endswith("PrometheusReporterFactory")
    assert int(conf["metrics.reporter.prom.port"]) != settings.telemetry.metrics_port
    for key, value in case.values.get("application", {}).get("config", {}).items():
        assert conf[key] == value
    taskmanager = one(objects, "Deployment", settings.scale_target.name)
    assert taskmanager["spec"]["replicas"] == case.values.get("application", {}).get("taskManager", {}).get(
        "replicas", 2
    )
    assert [c["name"] for c in taskmanager["spec"]["template"]["spec"]["containers"]] == ["taskmanager"]
    jobmanager, pod, _ = perdix_pod(objects)
    assert jobmanager["metadata"]["name"].endswith("-jobmanager")
    assert [c["name"] for c in pod["containers"]] == ["jobmanager", "perdix"]
    assert jobmanager["spec"]["strategy"] == {"type": "Recreate"}  # never two agents at once
    service = one(objects, "Service", jobmanager["metadata"]["name"])
    # The pod's readiness is Perdix's /readyz; TaskManagers must reach the JobManager regardless.
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert conf["jobmanager.rpc.address"] == service["metadata"]["name"]
    # The JobManager's REST API is in the same pod (the per-vertex reads and the flink-rest target use it).
    assert settings.scale_target.rest_url == "http://127.0.0.1:8081"


@pytest.mark.parametrize("case", OWN_POD, ids=[case.id for case in OWN_POD])
def test_the_other_modes_run_perdix_alone(case: Case, tmp_path: Path) -> None:
    objects = render(**case.render_kwargs())
    workloads = list(pod_templates(objects))
    assert len(workloads) == 1
    deployment, pod = workloads[0]
    assert [c["name"] for c in pod["containers"]] == ["perdix"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not [o for o in objects if o["metadata"]["name"].endswith(("-flink-conf", "-jobmanager", "-taskmanager"))]
    settings = load_rendered_settings(objects, tmp_path)
    example = yaml.safe_load((EXAMPLES / f"{case.example}.yaml").read_text()) if case.example else {}
    if case.mode == "flinkDeployment":
        # The operator's REST Service of the FlinkDeployment, where the per-vertex policies read the job graph.
        assert settings.scale_target.rest_url == f"http://{case.target_name}-rest.{case.target_namespace}.svc:8081"
    elif case.mode == "rest":
        assert settings.scale_target.rest_url == example["perdix"]["scaleTarget"]["restUrl"]
        assert settings.scale_target.job == example["perdix"]["scaleTarget"]["job"]


def test_config_change_rolls_the_perdix_pod() -> None:
    def checksum(objects: list[dict[str, Any]]) -> str:
        workload, _, _ = perdix_pod(objects)
        return str(workload["spec"]["template"]["metadata"]["annotations"]["checksum/perdix-config"])

    assert checksum(render()) == checksum(render())
    assert checksum(render()) != checksum(render(sets=["perdix.targetRecoveryTimeSeconds=450"]))


# ---- Grafana dashboard --------------------------------------------------------------------------


def agent_metric_names() -> set[str]:
    """Every series name the agent's /metrics can expose, read from the real Telemetry's registry."""
    telemetry = Telemetry(CollectorRegistry())
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
    names = set()
    for family in telemetry.registry.collect():
        names.add(family.name)
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ()))
    return names


def test_dashboard_is_off_by_default() -> None:
    assert not [o for o in render() if o["metadata"]["name"].endswith("-dashboard")]


def test_dashboard_configmap_uses_the_agent_metrics() -> None:
    objects = render(values={"grafanaDashboard": {"enabled": True}})
    dashboard_map = one(objects, "ConfigMap", "perdix-dashboard")
    assert dashboard_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(dashboard_map["data"]["perdix-flink-perdix.json"])
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"perdix_[a-z0-9_]+", expr)}
    exported = agent_metric_names()
    assert used <= exported, f"dashboard uses metrics the agent does not export: {sorted(used - exported)}"
    for needed in (
        "perdix_workload_rate",
        "perdix_forecast_peak",
        "perdix_capacity",
        "perdix_parallelism_current",
        "perdix_parallelism_recommended",
        "perdix_recovery_predicted_seconds",
        "perdix_recovery_measured_seconds",
    ):
        assert needed in used, needed


def test_each_release_has_its_own_dashboard() -> None:
    """One release per job: uid, title, file name and pod filter are the release's, so dashboards never collide."""
    values = {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}
    maps = {}
    for release, namespace in (("orders", "a"), ("orders", "b"), ("clicks", "a")):
        objects = render(values=values, release=release, namespace=namespace)
        [maps[(release, namespace)]] = [
            o for o in find(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")
        ]
    names = {key: m["metadata"]["name"] for key, m in maps.items()}
    assert len(set(names.values())) == 3, names
    files = {key: next(iter(m["data"])) for key, m in maps.items()}
    assert len(set(files.values())) == 3, files
    dashboards = {key: json.loads(maps[key]["data"][files[key]]) for key in maps}
    uids = {key: d["uid"] for key, d in dashboards.items()}
    assert len(set(uids.values())) == 3 and all(len(uid) <= 40 for uid in uids.values()), uids  # Grafana's limit
    assert dashboards[("orders", "b")]["title"] == "Perdix: b/orders"
    pod = next(v for v in dashboards[("orders", "a")]["templating"]["list"] if v["name"] == "pod")
    assert pod["allValue"] == "orders-perdix-jobmanager-.*" and "orders-perdix-jobmanager-" in pod["definition"]
    # The release's own pod matches the filter; the same job rendered again keeps its uid.
    assert re.fullmatch(pod["allValue"], "orders-perdix-jobmanager-7d9c5b6f4-x2x9q")
    again = one(render(values=values, release="orders", namespace="a"), "ConfigMap", names[("orders", "a")])
    assert json.loads(again["data"][files[("orders", "a")]])["uid"] == uids[("orders", "a")]


def test_monitors_are_off_by_default() -> None:
    for case in CASES:
        if not any(key in case.values for key in ("serviceMonitor", "podMonitor")):
            assert not find(render(**case.render_kwargs()), "ServiceMonitor") and not find(
                render(**case.render_kwargs()), "PodMonitor"
            )


@pytest.mark.parametrize(
    "case", [c for c in CASES if "podMonitor" in c.values or "serviceMonitor" in c.values], ids=lambda c: c.id
)
def test_monitors_scrape_what_they_should(case: Case) -> None:
    """Each monitor selects exactly the release's objects that have the port it names."""
    objects = render(**case.render_kwargs())
    pods = [(workload, pod) for workload, pod in pod_templates(objects)]
    for monitor in find(objects, "ServiceMonitor") + find(objects, "PodMonitor"):
        spec = monitor["spec"]
        assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "podMetricsEndpoints"}, spec
        assert spec["namespaceSelector"] == {"matchNames": [case.namespace]}
        wanted_labels = case.values[monitor["kind"][0].lower() + monitor["kind"][1:]].get("labels", {})
        assert wanted_labels.items() <= monitor["metadata"]["labels"].items()
        selector = spec["selector"]["matchLabels"].items()
        if monitor["kind"] == "ServiceMonitor":
            services = [s for s in find(objects, "Service") if selector <= s["metadata"]["labels"].items()]
            assert [s["metadata"]["name"] for s in services] == [f"{case.service_account}-metrics"]
            assert (
                [e["port"] for e in spec["endpoints"]]
                == [p["name"] for p in services[0]["spec"]["ports"]]
                == ["perdix-metrics"]
            )
            continue
        matched = [(w, pod) for w, pod in pods if selector <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(matched) == len(pods), "the PodMonitor selects every pod of the release"
        ports = {port["name"] for _, pod in matched for c in pod["containers"] for port in c.get("ports", [])}
        wanted = {e["port"] for e in spec["podMetricsEndpoints"]}
        assert wanted <= ports, f"endpoints name ports no pod has: {wanted - ports}"
        for endpoint in spec["podMetricsEndpoints"]:
            assert endpoint["path"] == "/metrics" and re.fullmatch(r"([0-9]+(ms|s|m|h))+", endpoint["interval"])
        # Flink's reporter (the series Perdix reads) in mode application; Perdix itself unless a
        # ServiceMonitor already scrapes it.
        assert ("flink-metrics" in wanted) == (case.mode == "application")
        assert ("perdix-metrics" in wanted) == (not find(objects, "ServiceMonitor"))


def test_monitor_combinations_that_cannot_work_are_refused() -> None:
    result = run_helm("template", values={"serviceMonitor": {"enabled": True}, "metricsService": {"enabled": False}})
    assert result.returncode != 0 and "serviceMonitor.enabled needs metricsService.enabled" in result.stderr
    result = run_helm(
        "template",
        values={"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
        example=EXAMPLE_OF_MODE["rest"],
    )
    assert result.returncode != 0 and "podMonitor.enabled" in result.stderr

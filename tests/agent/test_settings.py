"""Settings: precedence file < env < flag, and one readable line for every bad value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.settings import ConfigError, Settings, load_settings
from lab.settings import LabSettings, load_lab_settings, rescale_cost_overrides


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "perdix.yaml"
    path.write_text(text)
    return path


def test_defaults_are_valid() -> None:
    settings = load_settings()
    assert isinstance(settings, Settings)
    assert settings.loop_interval_s == 60
    assert settings.forecast_horizon_s == 900
    assert settings.wape_threshold == 0.25


def test_perdix_run_takes_the_default_scale_target_and_the_lab_the_simulated_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.clock import WallClock
    from agent.daemon import StartupError, build_parts

    # Outside a cluster the daemon stops at the Kubernetes client, past its check of the target's kind.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(StartupError) as error:
        build_parts(load_settings(), clock=WallClock())
    assert not str(error.value).startswith("scale_target.kind"), error.value
    assert load_lab_settings().scale_target.kind == "simulated"
    # Setting another key of the section keeps the lab's kind.
    assert load_lab_settings(None, {"scale_target.namespace": "lab"}).scale_target.kind == "simulated"


def test_precedence_file_then_env_then_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(
        tmp_path,
        "target_recovery_time_s: 100\nloop_interval_s: 30\nmax_parallelism: 20\n"
        "prometheus:\n  url: http://file:9090\n  timeout_s: 3\n",
    )
    monkeypatch.setenv("PERDIX_LOOP_INTERVAL_S", "45")
    monkeypatch.setenv("PERDIX_TARGET_RECOVERY_TIME_S", "200")
    monkeypatch.setenv("PERDIX_PROMETHEUS__URL", "http://env:9090")
    settings = load_settings(config, {"target_recovery_time_s": 300})
    assert settings.target_recovery_time_s == 300  # flag beats env and file
    assert settings.loop_interval_s == 45  # env beats file
    assert settings.max_parallelism == 20  # file beats default
    assert settings.prometheus.url == "http://env:9090"  # nested env beats nested file value
    assert settings.prometheus.timeout_s == 3  # sibling from the file survives


def test_the_loop_unset_is_30_s_where_a_rescale_is_in_place_and_60_s_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = {"scale_target.kind": "flink-rest"}
    assert load_settings(None, rest).loop_interval_s == 30
    # In place whether or not each rescale waits for a checkpoint: the stop is what the loop follows.
    assert load_settings(None, {**rest, "scale_target.checkpoint_before_rescale": False}).loop_interval_s == 30
    assert load_settings(None, {"scale_target.kind": "deployment"}).loop_interval_s == 60
    assert load_settings(None, {"scale_target.kind": "flinkdeployment"}).loop_interval_s == 60
    # Elsewhere a rescale-downtime prior the operator knows to be cheap (at most 2 % of the target) says so.
    cheap = {"scale_target.kind": "deployment", "downtime_rescale_prior_s": 2, "target_recovery_time_s": 300}
    assert load_settings(None, cheap).loop_interval_s == 30
    assert load_settings(None, {**cheap, "downtime_rescale_prior_s": 7}).loop_interval_s == 60
    # Set anywhere, it is the operator's: in the file, the environment or a flag, whatever the target.
    assert load_settings(write(tmp_path, "loop_interval_s: 60\n"), rest).loop_interval_s == 60
    assert load_settings(None, {**rest, "loop_interval_s": 90}).loop_interval_s == 90
    monkeypatch.setenv("PERDIX_LOOP_INTERVAL_S", "45")
    assert load_settings(None, rest).loop_interval_s == 45
    monkeypatch.delenv("PERDIX_LOOP_INTERVAL_S")
    # The lab's simulated job follows its rescale-cost profile: in place, aligned or not, gets the in-place loop.
    assert load_lab_settings(None, rescale_cost_overrides("in-place")).loop_interval_s == 30
    assert load_lab_settings(None, rescale_cost_overrides("in-place-aligned")).loop_interval_s == 30
    assert load_lab_settings(None, {"simulator.rescale_aligned": True}).loop_interval_s == 60
    assert load_lab_settings(None, {}).loop_interval_s == 60


def test_flag_dotted_keys_reach_nested_sections(tmp_path: Path) -> None:
    config = write(tmp_path, "simulator:\n  partitions: 24\n")
    settings = load_lab_settings(config, {"simulator.seed": 99, "scale_target.kind": "deployment"})
    assert settings.simulator.partitions == 24
    assert settings.simulator.seed == 99
    assert settings.scale_target.kind == "deployment"


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        # min above max: the message names both keys and values
        ("min_parallelism: 12\nmax_parallelism: 8\n", "min_parallelism (12) > max_parallelism (8)"),
        # a negative target is rejected with its key
        ("target_recovery_time_s: -5\n", "target_recovery_time_s: Input should be greater than 0 (got -5)"),
        # unknown keys are errors, not silently ignored (a typo must not become a default)
        ("target_recovery_time: 300\n", "target_recovery_time: unknown key"),
        # wrong type
        ("dry_run: maybe\n", "dry_run:"),
        # nested unknown key
        ("prometheus:\n  ulr: http://x\n", "prometheus.ulr: unknown key"),
        # malformed PromQL
        ("prometheus:\n  queries:\n    workload: 'sum(rate(x[1m])'\n", "prometheus.queries.workload: malformed PromQL"),
        # a policy that runs only in the lab, or not at all, or only on a per-vertex target
        (
            "policy: justin\n",
            "policy: 'justin' sets the parallelism of each job vertex: scale_target.kind must be one "
            "of flink-rest, flinkdeployment, not 'deployment'",
        ),
        (
            "policy: qescalor\nscale_target:\n  kind: deployment\n",
            "policy: 'qescalor' sets the parallelism of each job vertex",
        ),
        ("policy: oracle\n", "policy: 'oracle' runs only in the lab (it reads the simulator's true future"),
        (
            "policy: daedelus\n",
            "policy: unknown policy 'daedelus'; one of daedalus, static, flink-autoscaler, ds2, hpa, keda-lag",
        ),
        # the flink-autoscaler's options are validated like the rest
        ("flink_autoscaler:\n  target_utilization: 1.5\n", "flink_autoscaler.target_utilization:"),
        ("flink_autoscaler:\n  metrics_window: 900\n", "flink_autoscaler.metrics_window: unknown key"),
        # CPU is a TaskManager's: with workers named by subtask (the default) nothing could pair it with a worker
        (
            "utilization: cpu\nscale_target:\n  kind: flink-rest\n",
            "prometheus.worker_label: utilization: cpu reads CPU per TaskManager",
        ),
        (
            "policy: hpa\nscale_target:\n  kind: deployment\n",
            "prometheus.worker_label: policy: 'hpa' reads CPU per TaskManager",
        ),
        # KEDA's scaler reads each Kafka partition's lag: on a real job it needs kafka_exporter's offsets
        (
            "policy: keda-lag\nscale_target:\n  kind: flink-rest\n",
            "prometheus.queries.partition_end_offsets: policy 'keda-lag' reads the lag of each source partition",
        ),
        (
            "policy: keda-lag\nscale_target:\n  kind: flink-rest\nprometheus:\n  queries:\n"
            "    partition_end_offsets: 'max by (partition) (kafka_topic_partition_current_offset)'\n",
            "prometheus.queries.partition_committed_offsets: policy 'keda-lag'",
        ),
        (
            "prometheus:\n  queries:\n    partition_end_offsets: 'max by (partition) (x'\n",
            "prometheus.queries.partition_end_offsets: malformed PromQL",
        ),
        # the simulated job is the lab's: the daemon's settings have no such section
        ("simulator:\n  partitions: 24\n", "simulator: unknown key"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path: Path, yaml_text: str, message: str) -> None:
    config = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    text = str(error.value)
    assert message in text
    assert "\n" not in text
    assert str(config) in text


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        # a simulator that cannot run
        ("simulator:\n  partitions: 0\n", "simulator: partitions (0) must be at least 1"),
        ("simulator:\n  partitions: 4\n  initial_parallelism: 8\n", "initial_parallelism (8) > partitions (4)"),
        # the lab takes the oracle, not the per-operator policies
        ("policy: justin\n", "policy: 'justin' runs on the operator-DAG testbed only"),
    ],
)
def test_bad_lab_config_is_one_line_naming_the_key(tmp_path: Path, yaml_text: str, message: str) -> None:
    config = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as error:
        load_lab_settings(config)
    text = str(error.value)
    assert message in text
    assert "\n" not in text
    assert str(config) in text


def test_cpu_readers_run_with_workers_named_by_taskmanager(tmp_path: Path) -> None:
    for text in ("utilization: cpu\n", "policy: hpa\n"):
        settings = load_settings(
            write(tmp_path, text + "scale_target:\n  kind: flink-rest\nprometheus:\n  worker_label: tm_id\n")
        )
        assert settings.prometheus.worker_label == "tm_id" and "cpu" not in settings.skipped_queries
        # The embedded simulator reads no Prometheus: any worker label will do there.
        assert load_lab_settings(write(tmp_path, text)).scale_target.kind == "simulated"


def test_keda_lag_runs_on_a_real_job_with_the_partition_offsets(tmp_path: Path) -> None:
    text = (
        "policy: keda-lag\nscale_target:\n  kind: flink-rest\nprometheus:\n  queries:\n"
        "    partition_end_offsets: 'max by (partition) (kafka_topic_partition_current_offset{topic=\"orders\"})'\n"
        "    partition_committed_offsets: 'max by (partition) (kafka_consumergroup_current_offset{topic=\"orders\"})'\n"
    )
    settings = load_settings(write(tmp_path, text))
    assert settings.policy == "keda-lag" and "consumergroup" in settings.prometheus.queries.partition_committed_offsets
    # The embedded simulator gives the offsets itself.
    assert load_lab_settings(write(tmp_path, "policy: keda-lag\n")).prometheus.queries.partition_end_offsets == ""


def test_the_lab_accepts_the_oracle() -> None:
    assert load_lab_settings(None, {"policy": "oracle"}).policy == "oracle"


def test_bad_env_value_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDIX_MAX_PARALLELISM", "lots")
    with pytest.raises(ConfigError, match="max_parallelism"):
        load_settings()


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"perdix.yaml:2: not valid YAML"):
        load_settings(write(tmp_path, "a: 1\nb: ]\n"))
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(write(tmp_path, "- 1\n- 2\n"))


def test_every_field_has_a_description() -> None:
    def walk(model: type, prefix: str = "") -> list[str]:
        missing = []
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            if not field.description:
                missing.append(prefix + name)
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                missing += walk(annotation, f"{prefix}{name}.")
        return missing

    assert walk(Settings) == []
    assert walk(LabSettings) == []


def test_flink_autoscaler_options_reach_the_policy(tmp_path: Path) -> None:
    from agent.loop import policy_for

    config = write(
        tmp_path,
        "policy: flink-autoscaler\nflink_autoscaler:\n  stabilization_s: 20\n  metrics_window_s: 60\n"
        "  scale_down_interval_s: 0\n  target_utilization: 0.8\n",
    )
    options = policy_for(load_settings(config)).core.settings  # type: ignore[attr-defined]
    assert (options.stabilization_s, options.metrics_window_s, options.scale_down_interval_s) == (20, 60, 0)
    assert (
        options.target_utilization == 0.8 and options.catch_up_duration_s == 1800
    )  # the rest: the operator's defaults
    assert policy_for(load_lab_settings(write(tmp_path, "policy: hpa\n"))).name == "hpa"


def test_flink_autoscaler_defaults_are_the_operators() -> None:
    from planner.flink_autoscaler import FlinkAutoscalerSettings

    defaults = FlinkAutoscalerSettings()
    for name, value in Settings().flink_autoscaler.model_dump().items():
        assert getattr(defaults, name) == value, name


def test_every_perdix_variable_the_project_reads_is_a_setting_or_known_not_to_be_one() -> None:
    """``unknown_environment_variable`` refuses a PERDIX_* variable that names no setting; the build's, the lab's and
    the tests' own variables must be listed in NOT_SETTINGS, or exporting one would stop every command."""
    from agent.settings_sources import ENV_NESTED_DELIMITER, ENV_PREFIX, NOT_SETTINGS, SERVICE_LINK
    from lab.settings import LabSettings

    root = Path(__file__).resolve().parents[2]
    files = [root / "Makefile", root / "Dockerfile", root / ".ci" / "run"]
    for directory in (
        "agent",
        "cli",
        "lab",
        "models",
        "planner",
        "spark",
        "simulator",
        "benchmarks",
        "scripts",
        "helm",
    ):
        files += [
            p for p in (root / directory).rglob("*") if p.is_file() and p.suffix in {".py", ".sh", ".yaml", ".tpl"}
        ]
    files += [p for p in (root / "tests").rglob("*.py") if "badinput" not in p.parts]
    known = {field.upper() for field in LabSettings.model_fields} | NOT_SETTINGS
    used: dict[str, Path] = {}
    for path in files:
        if path.exists():
            for name in re.findall(r"PERDIX_[A-Z][A-Z0-9_]*", path.read_text(errors="replace")):
                used.setdefault(name, path)
    assert len(used) >= 5
    examples = {"PERDIX_DRYRUN", "PERDIX_SECTION__WINDOW_S"}  # a misspelling a docstring names; a test's made-up key
    unknown = {
        name: str(path.relative_to(root))
        for name, path in used.items()
        if name not in examples
        and not SERVICE_LINK.fullmatch(name)
        and name[len(ENV_PREFIX) :].split(ENV_NESTED_DELIMITER, 1)[0] not in known
    }
    assert not unknown, unknown


def test_the_variables_kubernetes_gives_a_pod_for_services_named_perdix_are_no_settings_and_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A release named perdix has Services perdix-metrics and perdix-jobmanager, and Kubernetes gives every pod of the
    namespace their host and port variables; refused as misspelled settings, the agent would never start."""
    for name, value in {
        "PERDIX_METRICS_SERVICE_HOST": "10.0.0.1",
        "PERDIX_METRICS_SERVICE_PORT": "9100",
        "PERDIX_METRICS_SERVICE_PORT_METRICS": "9100",
        "PERDIX_METRICS_PORT": "tcp://10.0.0.1:9100",
        "PERDIX_METRICS_PORT_9100_TCP": "tcp://10.0.0.1:9100",
        "PERDIX_METRICS_PORT_9100_TCP_PROTO": "tcp",
        "PERDIX_METRICS_PORT_9100_TCP_PORT": "9100",
        "PERDIX_METRICS_PORT_9100_TCP_ADDR": "10.0.0.1",
        "PERDIX_PORT": "tcp://10.0.0.2:80",
    }.items():
        monkeypatch.setenv(name, value)
    assert load_settings(None, {}).dry_run is False
    monkeypatch.setenv("PERDIX_DRYRUN", "true")
    with pytest.raises(ConfigError, match="PERDIX_DRYRUN: not a setting"):
        load_settings(None, {})


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("HTTPS://prom.example.com", "https://prom.example.com"),
        ("http://prometheus:9090\n", "http://prometheus:9090"),
        (" http://[::1]:9090/prom/ ", "http://[::1]:9090/prom/"),
        (
            "https://user:pw@prom.monitoring.svc.cluster.local/api/",
            "https://user:pw@prom.monitoring.svc.cluster.local/api/",
        ),
    ],
)
def test_a_url_is_read_without_blanks_and_with_its_scheme_in_lower_case(given: str, read: str) -> None:
    """A value from a Secret made with ``echo`` ends in a newline; ``HTTPS://`` left TLS unverified, the client
    comparing the scheme as written."""
    settings = load_settings(None, {"prometheus.url": given, "scale_target.rest_url": given})
    assert (settings.prometheus.url, settings.scale_target.rest_url) == (read, read)

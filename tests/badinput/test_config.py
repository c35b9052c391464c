"""Bad settings files and PERDIX_* variables for perdix run and perdix simulate: one line naming the file (and
line) and the key, or the environment variable, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings_sources import MAX_CONFIG_BYTES
from tests.badinput.conftest import assert_one_line, good_trace, run_perdix

# (case, the file's bytes or None for a path that is not a file, what the line says besides the file's name)
CONFIGS: list[tuple[str, bytes | None, str]] = [
    ("not UTF-8", b"dry_run: true\n# caf\xe9\n", ":2: config file is not UTF-8"),
    ("binary", bytes(range(256)) * 4, "not UTF-8"),
    ("a list, not a mapping", b"- dry_run\n- true\n", "must hold a mapping of settings, not list"),
    ("a scalar", b"just words\n", "must hold a mapping of settings, not str"),
    (
        "a key given twice",
        b"dry_run: true\nloop_interval_s: 30\ndry_run: false\n",
        ":3: not valid YAML: key 'dry_run' given twice (first on line 1)",
    ),
    (
        "a nested key given twice",
        b"prometheus:\n  url: http://a\n  url: http://b\n",
        ":3: not valid YAML: key 'url' given twice",
    ),
    ("not YAML", b"dry_run: [true\n", "not valid YAML"),
    ("tab indentation", b"prometheus:\n\turl: x\n", ":2: not valid YAML"),
    ("nested too deeply", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "YAML"),
    ("larger than 1 MiB", b"#" * (MAX_CONFIG_BYTES + 1), "larger than 1 MiB"),
    ("unknown key", b"loop_interval: 60\n", "loop_interval: unknown key"),
    ("a key that is not a name", b"1: x\n", "1: Keys should be strings (got 1)"),
    ("unknown nested key", b"prometheus:\n  uri: http://x\n", "prometheus.uri: unknown key"),
    ("a section that is a string", b"prometheus: notamapping\n", "prometheus:"),
    (
        "loop_interval_s 1e12",
        b"loop_interval_s: 1e12\n",
        "loop_interval_s: Input should be less than or equal to 86400",
    ),
    ("loop_interval_s .inf", b"loop_interval_s: .inf\n", "loop_interval_s: Input should be a finite number"),
    ("loop_interval_s .nan", b"loop_interval_s: .nan\n", "loop_interval_s: Input should be a finite number"),
    ("loop_interval_s 0", b"loop_interval_s: 0\n", "loop_interval_s: Input should be greater than 0"),
    ("target_recovery_time_s negative", b"target_recovery_time_s: -5\n", "target_recovery_time_s"),
    (
        "max_parallelism past Flink's limit",
        b"max_parallelism: 100000\n",
        "max_parallelism: Input should be less than or equal to 32768",
    ),
    (
        "min_parallelism above max",
        b"min_parallelism: 8\nmax_parallelism: 4\n",
        "min_parallelism (8) > max_parallelism (4)",
    ),
    ("a timeout of .inf", b"prometheus:\n  timeout_s: .inf\n", "prometheus.timeout_s: Input should be a finite number"),
    ("a count that is not a whole number", b"max_parallelism: 4.5\n", "max_parallelism"),
    ("a boolean that is a word", b"forecast_selection: perhaps\n", "forecast_selection"),
    ("true for a count", b"max_parallelism: true\n", "max_parallelism: Input should be a number, not true"),
    ("yes for a duration", b"loop_interval_s: yes\n", "loop_interval_s: Input should be a number, not true"),
    (
        "false for a nested number",
        b"safeguards:\n  memory:\n    heap_usage_threshold: false\n",
        "safeguards.memory.heap_usage_threshold: Input should be a number, not false",
    ),
    (
        "a job name that ends the PromQL string",
        b"prometheus:\n  flink_job: 'x\"} or vector(1) #'\n",
        "prometheus.flink_job: '\"' cannot stand in the PromQL string",
    ),
    (
        "a source with an escape PromQL refuses",
        b"prometheus:\n  source_operator: 'Source:_my\\.topic'\n",
        "prometheus.source_operator: '\\.' is no escape of the PromQL string",
    ),
    ("a worker label that is no label", b"prometheus:\n  worker_label: tm id\n", "is not a Prometheus label name"),
    ("a directory", None, "directory"),
    ("missing", None, "cannot read config file: No such file or directory"),
]


def _command(name: str, config: Path, trace: Path) -> list[str]:
    if name == "run":
        return ["run", "--config", str(config), "--dry-run"]
    return ["simulate", "--config", str(config), "--trace", str(trace), "--hours", "0.2", "--out", "out"]


@pytest.mark.parametrize("command", ["run", "simulate"])
@pytest.mark.parametrize(("case", "content", "fragment"), CONFIGS, ids=[case for case, _, _ in CONFIGS])
def test_a_bad_config_file_is_one_line_naming_the_file(
    tmp_path: Path, command: str, case: str, content: bytes | None, fragment: str
) -> None:
    config = tmp_path / "perdix.yaml"
    if content is not None:
        config.write_bytes(content)
    elif case == "a directory":
        config.mkdir()
    result = run_perdix(*_command(command, config, good_trace(tmp_path / "t.csv")), cwd=tmp_path)
    assert_one_line(result, "perdix.yaml", fragment)
    assert not (tmp_path / "out").exists()


# (variable, value, what the line says besides the variable's name)
VARIABLES: list[tuple[str, str, str]] = [
    ("PERDIX_PROMETHEUS", "notjson", "not a JSON object of the 'prometheus' section"),
    ("PERDIX_SAFEGUARDS__BLOCKED_PERIODS", "on", "not a JSON object of the 'safeguards.blocked_periods' section"),
    (
        "PERDIX_SAFEGUARDS__BLOCKED_PERIODS__PERIODS",
        "09:00-10:00",
        """not a JSON list (e.g. PERDIX_SAFEGUARDS__BLOCKED_PERIODS__PERIODS='["..."]')""",
    ),
    ("PERDIX_SCALE_TARGET", "[1, 2]", "scale_target"),
    ("PERDIX_SCALE_TARGET", '{"kind": "x"}', "scale_target.kind"),
    ("PERDIX_LOOP_INTERVAL_S", "abc", "loop_interval_s: Input should be a valid number"),
    ("PERDIX_LOOP_INTERVAL_S", "1e12", "loop_interval_s: Input should be less than or equal to 86400"),
    ("PERDIX_LOOP_INTERVAL_S", "nan", "loop_interval_s: Input should be a finite number"),
    ("PERDIX_PROMETHEUS__TIMEOUT_S", "-1", "prometheus.timeout_s: Input should be greater than 0"),
    ("PERDIX_PROMETHEUS__TIMEOUT_S", "inf", "prometheus.timeout_s"),
    ("PERDIX_MAX_PARALLELISM", "0", "max_parallelism"),
    ("PERDIX_FORECAST_SELECTION", "perhaps", "forecast_selection"),
    ("PERDIX_DRYRUN", "true", "not a setting (did you mean PERDIX_DRY_RUN?)"),
    ("PERDIX_LOOP_INTERVAL", "5", "not a setting (did you mean PERDIX_LOOP_INTERVAL_S?)"),
]


@pytest.mark.parametrize(("variable", "value", "fragment"), VARIABLES, ids=[f"{v}={x}" for v, x, _ in VARIABLES])
def test_a_bad_environment_variable_is_named_in_its_own_error(
    tmp_path: Path, variable: str, value: str, fragment: str
) -> None:
    config = tmp_path / "perdix.yaml"
    config.write_text("loop_interval_s: 30\nmax_parallelism: 8\n")
    result = run_perdix("run", "--config", config, "--dry-run", cwd=tmp_path, env={variable: value})
    line = assert_one_line(result, f"environment variable {variable}", fragment)
    assert "perdix.yaml" not in line  # the file is not blamed for the variable


def test_a_bad_simulator_variable_is_named_for_simulate(tmp_path: Path) -> None:
    result = run_perdix(
        "simulate",
        "--trace",
        good_trace(tmp_path / "t.csv"),
        "--hours",
        "0.2",
        "--out",
        "out",
        cwd=tmp_path,
        env={"PERDIX_SIMULATOR__PARTITIONS": "0"},
    )
    assert_one_line(result, "environment variable PERDIX_SIMULATOR__PARTITIONS", "partitions (0)")
    assert not (tmp_path / "out").exists()


def _alias_bomb(levels: int) -> bytes:
    """A list of ten strings, then ``levels`` lists of ten aliases of the list before: a few hundred bytes that
    stand for ten to the ``levels + 1`` strings."""
    anchors = ["&a0 [" + ", ".join(["lol"] * 10) + "]"]
    anchors += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return ("policy: [" + ", ".join(anchors) + "]\n").encode()


def test_a_bad_value_of_a_few_hundred_bytes_that_aliases_a_billion_is_shown_cut_short(tmp_path: Path) -> None:
    """The error line shows a few elements of the bad value, not its whole repr: with every alias expanded that
    took gigabytes (a MemoryError traceback at nine levels, an 8-MB line at six)."""
    config = tmp_path / "perdix.yaml"
    config.write_bytes(_alias_bomb(8))
    assert len(config.read_bytes()) < 600
    result = run_perdix(*_command("simulate", config, good_trace(tmp_path / "t.csv")), cwd=tmp_path)
    line = assert_one_line(result, "perdix.yaml", "policy: Input should be a valid string (got [['lol', 'lol'")
    assert len(line) < 1_000


def test_many_problems_are_named_five_at_a_time(tmp_path: Path) -> None:
    config = tmp_path / "perdix.yaml"
    config.write_text("".join(f"unknown_{n}: 1\n" for n in range(8)))
    line = assert_one_line(
        run_perdix("run", "--config", config, "--dry-run", cwd=tmp_path), "perdix.yaml", "and 3 more"
    )
    assert line.count("unknown key") == 5


SIMULATORS = [
    ("no worker speeds", "simulator: {worker_speeds: []}", "worker_speeds must list at least one speed"),
    (
        "partition weights past float",
        "simulator: {partitions: 8, partition_weights: [1e308, 1e308, 1, 1, 1, 1, 1, 1]}",
        "partition_weights must have a finite sum",
    ),
    ("a worker past 1e12 records/s", "simulator: {worker_speeds: [1e308]}", "over 1e+12 records/s a worker"),
]


@pytest.mark.parametrize(("case", "content", "fragment"), SIMULATORS, ids=[case for case, _, _ in SIMULATORS])
def test_a_simulated_job_that_cannot_run_is_refused_with_the_settings(
    tmp_path: Path, case: str, content: str, fragment: str
) -> None:
    """No speeds was a ZeroDivisionError traceback; weights or a speed past float ran with an overflow warning and
    reported no record produced or infinite capacity."""
    config = tmp_path / "perdix.yaml"
    config.write_text(content + "\n")
    assert_one_line(run_perdix(*_command("simulate", config, good_trace(tmp_path / "t.csv")), cwd=tmp_path), fragment)
    assert not (tmp_path / "out").exists()

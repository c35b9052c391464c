"""The other files a command reads: a capacity model named by capacity_prior_path, a history to retrain on, and
a settings file given to the lab's and the batch side's commands: one line naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.badinput.conftest import assert_one_line, good_trace, run_perdix


def _prior(root: Path, case: str) -> str:
    path = root / "prior.json"
    if case == "binary":
        path.write_bytes(os.urandom(1024).replace(b"\n", b"\xff"))
    elif case == "not JSON":
        path.write_text("capacities: 3\n")
    elif case == "empty":
        path.write_text("")
    elif case == "JSON of another kind":
        path.write_text('{"kind": "something-else"}\n')
    elif case == "a directory":
        path.mkdir()
    elif case == "endless":
        return "/dev/zero"
    elif case == "nested deeper than the parser goes":
        path.write_text("[" * 200_000 + "]" * 200_000)
    return str(path)


PRIOR_CASES = [
    ("binary", "not UTF-8 text"),
    ("not JSON", "not valid JSON"),
    ("empty", "not valid JSON"),
    ("JSON of another kind", "prior.json"),
    ("a directory", "Is a directory"),
    ("missing", "no such file"),
    ("endless", "larger than 16 MiB"),
    ("nested deeper than the parser goes", "not valid JSON (nested deeper than the parser goes)"),
]


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
@pytest.mark.parametrize(("case", "fragment"), PRIOR_CASES, ids=[case for case, _ in PRIOR_CASES])
def test_a_bad_capacity_model_file_is_one_line_naming_it(
    tmp_path: Path, command: str, case: str, fragment: str
) -> None:
    prior = _prior(tmp_path, case)
    (tmp_path / "perdix.yaml").write_text(f"capacity_prior_path: {prior}\n")
    good_trace(tmp_path / "t.csv")
    args = [command, "--config", "perdix.yaml", "--trace", "t.csv", "--hours", "0.2", "--out", "out"]
    if command == "evaluate":
        args += ["--policies", "static"]
    result = run_perdix(*args, cwd=tmp_path, timeout=120)
    assert_one_line(result, "capacity_prior_path", Path(prior).name, fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "--trace", "t.csv", "--hours", "0.2", "--out", "out"],
        ["export-history", "--from-simulation", "t.csv", "--job", "j", "--out", "history", "--hours", "0.2"],
    ],
    ids=["evaluate", "export-history"],
)
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"simulator:\n  seed: 1\n# \xff\n", "not UTF-8"),
        (b"- a\n", "mapping"),
        (b"simulator:\n  partitions: .nan\n", "simulator.partitions"),
    ],
    ids=["not UTF-8", "a list", "NaN"],
)
def test_a_bad_config_file_is_one_line_for_the_lab_and_batch_commands(
    tmp_path: Path, command: list[str], content: bytes, fragment: str
) -> None:
    (tmp_path / "perdix.yaml").write_bytes(content)
    good_trace(tmp_path / "t.csv")
    result = run_perdix(*command, "--config", "perdix.yaml", cwd=tmp_path, timeout=120)
    assert_one_line(result, "perdix.yaml", fragment)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["perdix.yaml", "t.csv"]


def test_a_history_file_that_is_not_parquet_is_one_line_naming_it(tmp_path: Path) -> None:
    part = tmp_path / "history" / "job=j" / "date=2026-01-01" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(os.urandom(2000))
    result = run_perdix("retrain", "--history", "history", "--registry", "registry", "--serial", cwd=tmp_path)
    assert_one_line(result, "part-0.parquet")
    assert not (tmp_path / "registry").exists()


KUBECONFIGS = [
    ("not YAML", b"a: [\n", "not valid YAML"),
    ("binary", b"\x00\x01garbage", "not valid YAML: unacceptable character"),
    ("a list", b"- 1\n", "not a kubeconfig (TypeError"),
]


@pytest.mark.parametrize(("case", "content", "fragment"), KUBECONFIGS, ids=[case for case, _, _ in KUBECONFIGS])
def test_a_kubeconfig_that_is_not_one_is_one_line_naming_it(
    tmp_path: Path, case: str, content: bytes, fragment: str
) -> None:
    """Each was a traceback of the YAML parser or an error that did not say the file was no kubeconfig."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(content)
    config = tmp_path / "perdix.yaml"
    config.write_text(f"dry_run: true\nscale_target:\n  kubeconfig: {kubeconfig}\n")
    assert_one_line(run_perdix("run", "--config", config, cwd=tmp_path), "scale_target.kubeconfig (", fragment)


URLS = [
    ("http://[::1", "not a URL (Invalid IPv6 URL)"),
    ("notaurl", "not an http:// or https:// URL"),
    ("ftp://flink:8081", "not an http:// or https:// URL"),
    ("http://flink:99999", "not a URL (Port out of range"),
    ("http://:8081", "no host in the URL"),
]


@pytest.mark.parametrize("key", ["prometheus.url", "scale_target.rest_url"])
@pytest.mark.parametrize(("url", "fragment"), URLS, ids=[url for url, _ in URLS])
def test_a_url_that_is_not_an_http_one_is_refused_with_the_settings(
    tmp_path: Path, key: str, url: str, fragment: str
) -> None:
    """``http://[::1`` as the REST or the Prometheus URL was a ValueError traceback from the HTTP client."""
    section, name = key.split(".")
    config = tmp_path / "perdix.yaml"
    config.write_text(f"dry_run: true\n{section}:\n  {name}: '{url}'\n")
    assert_one_line(run_perdix("run", "--config", config, cwd=tmp_path), f"perdix.yaml: {key}: {fragment}")


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
def test_a_model_registry_no_filesystem_opens_is_one_line_for_the_lab(tmp_path: Path, command: str) -> None:
    """A RegistryError traceback from the replayed agent's forecaster, as it was at perdix run's start."""
    config = tmp_path / "perdix.yaml"
    config.write_text("model_registry: nosuchproto://bucket/models\n")
    trace = good_trace(tmp_path / "t.csv")
    args = [command, "--trace", trace, "--hours", "0.2", "--out", "out", "--config", config]
    result = run_perdix(*args, *(["--policies", "static"] if command == "evaluate" else []), cwd=tmp_path)
    assert_one_line(result, "model_registry: nosuchproto://bucket/models: unsupported location")
    assert not (tmp_path / "out").exists()

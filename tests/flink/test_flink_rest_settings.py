"""Settings of the flink-rest target: the parallelism query defaults to the running source subtasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings import FLINK_REST_PARALLELISM_QUERY, PromQLQueries, load_settings


def test_the_flink_rest_target_counts_source_subtasks_by_default() -> None:
    settings = load_settings(None, {"scale_target.kind": "flink-rest"})
    assert settings.prometheus.queries.parallelism == FLINK_REST_PARALLELISM_QUERY
    assert settings.prometheus.queries.throughput == PromQLQueries().throughput


@pytest.mark.parametrize("kind", ["simulated", "deployment", "statefulset", "flinkdeployment"])
def test_other_targets_keep_the_registered_taskmanagers(kind: str) -> None:
    assert load_settings(None, {"scale_target.kind": kind}).prometheus.queries.parallelism == PromQLQueries().parallelism


def test_an_explicit_parallelism_query_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "perdix.yaml"
    config.write_text("prometheus:\n  queries:\n    parallelism: count(up)\n")
    monkeypatch.setenv("PERDIX_SCALE_TARGET__KIND", "flink-rest")
    assert load_settings(config).prometheus.queries.parallelism == "count(up)"
    config.write_text("prometheus:\n  url: http://127.0.0.1:1\n")
    assert load_settings(config).prometheus.queries.parallelism == FLINK_REST_PARALLELISM_QUERY

"""The scale-out query: the running source subtasks on every target (one default, no per-target special case)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings import PromQLQueries, load_settings


@pytest.mark.parametrize("kind", ["flink-rest", "deployment", "statefulset", "flinkdeployment"])
def test_every_target_counts_the_running_source_subtasks(kind: str) -> None:
    # In place (flink-rest) idle TaskManagers stay registered, so counting them would be wrong there;
    # in reactive mode the running subtasks are the TaskManagers' slots, so one query fits every target.
    query = load_settings(None, {"scale_target.kind": kind}).prometheus.queries.parallelism
    assert query == PromQLQueries().parallelism
    assert query.startswith("max(count by (operator_id) (") and "numRecordsOut" in query


def test_an_explicit_parallelism_query_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "perdix.yaml"
    config.write_text("prometheus:\n  queries:\n    parallelism: count(up)\n")
    monkeypatch.setenv("PERDIX_SCALE_TARGET__KIND", "flink-rest")
    assert load_settings(config).prometheus.queries.parallelism == "count(up)"

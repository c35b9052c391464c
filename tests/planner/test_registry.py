"""The policy registry: every spec builds what it says, and everything that lists policies reads it."""

from __future__ import annotations

import pytest

from agent.settings import Settings
from lab.settings import LabSettings
from planner import registry
from planner.registry import PER_VERTEX_TARGETS, SPECS, Signal


@pytest.mark.parametrize("name", list(SPECS))
def test_each_spec_builds_its_forms_under_its_name_and_declares_the_forecast_it_reads(name: str) -> None:
    spec = SPECS[name]
    assert spec.whole_job is not None or spec.per_vertex is not None, name
    forms = [spec.policy()] if spec.whole_job is not None else []
    forms += [spec.vertex_policy()] if spec.per_vertex is not None else []
    for policy in forms:
        assert policy.name == name
        # The agent skips forecasting for a policy that does not read it: the spec must say the same.
        if policy.uses_forecast:
            assert Signal.FORECAST in spec.signals, name


def test_the_lists_are_read_off_the_specs() -> None:
    assert registry.production() == Settings.runnable_policies
    assert registry.whole_job() == LabSettings.runnable_policies
    assert set(registry.production()) | set(registry.lab_only()) == set(SPECS)
    assert set(registry.vertex_only()) <= set(registry.per_vertex()) & set(registry.production())
    for name in registry.vertex_only():
        assert SPECS[name].targets == PER_VERTEX_TARGETS
    for name in registry.lab_only():
        assert SPECS[name].targets == ("simulated",) and Signal.SIMULATOR_TRUTH in SPECS[name].signals


def test_a_policy_with_both_forms_plans_per_vertex_only_where_the_target_sets_vertices() -> None:
    ds2 = SPECS["ds2"]
    assert [ds2.plans_per_vertex(kind) for kind in ("flink-rest", "flinkdeployment", "deployment", "simulated")] == [
        True,
        True,
        False,
        False,
    ]
    assert not SPECS["daedalus"].plans_per_vertex("flink-rest")


def test_options_come_from_the_settings_and_a_sweep_s_knob_wins() -> None:
    settings = LabSettings(policy="keda-lag", keda_lag_threshold=1234)
    assert SPECS["keda-lag"].policy(settings).knob == 1234  # type: ignore[attr-defined]
    assert SPECS["hpa"].policy(knob=0.5).knob == 0.5  # type: ignore[attr-defined]
    assert SPECS["daedalus"].knob_setting == "target_recovery_time_s"


def test_unknown_and_vertex_only_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: .*daedalus"):
        registry.spec("daedelus")
    with pytest.raises(KeyError, match="operator-DAG testbed"):
        SPECS["justin"].policy()

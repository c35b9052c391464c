"""The generated reference pages (docs/configuration.md, docs/metrics.md) agree with the code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from agent.settings import Settings
from agent.telemetry import Telemetry

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_docs", module)
    spec.loader.exec_module(module)
    return module


gen_docs = _generator()


@pytest.mark.parametrize("page", ["configuration.md", "metrics.md"])
def test_the_checked_in_page_is_what_the_code_generates(page: str) -> None:
    path = ROOT / "docs" / page
    render = {"configuration.md": gen_docs.render_configuration, "metrics.md": gen_docs.render_metrics}[page]
    assert path.read_text() == render(), f"docs/{page} is stale: run `make generate` and commit it"


def test_every_setting_has_a_row_and_a_description() -> None:
    rows = {row.key: row for row in gen_docs.setting_rows(Settings, gen_docs._chart_values())}
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert rows, "no settings found"
    for key, row in rows.items():
        assert f"| `{key}` |" in text
        assert row.description, f"{key} has no description in its Field"
    assert rows["prometheus.url"].env == "PERDIX_PROMETHEUS__URL"
    assert rows["target_recovery_time_s"].helm == "perdix.targetRecoveryTimeSeconds"
    assert rows["target_recovery_time_s"].range.startswith("> 0")


def test_a_new_setting_is_picked_up_with_its_type_default_range_and_helm_value() -> None:
    class Inner(BaseModel):
        window_s: float = Field(30.0, ge=1, le=600, description="A window, seconds.")

    class Tree(BaseModel):
        mode: Literal["a", "b"] = Field("a", description="A mode.")
        section: Inner = Field(default_factory=Inner, description="A section.")

    values = {"section": {"windowSeconds": 30}}
    rows = {row.key: row for row in gen_docs.setting_rows(Tree, values)}
    assert set(rows) == {"mode", "section.window_s"}
    window = rows["section.window_s"]
    assert (window.type, window.default, window.range) == ("number", "`30.0`", "≥ 1, ≤ 600")
    assert window.helm == "perdix.section.windowSeconds"
    assert window.env == "PERDIX_SECTION__WINDOW_S"
    assert rows["mode"].type == "one of `a`, `b`"
    assert rows["mode"].helm is None  # not in the chart's values


def test_every_registered_metric_is_documented_with_its_labels() -> None:
    """The source scan agrees with what a live Telemetry registers: same names, types and labels."""
    from prometheus_client.metrics import MetricWrapperBase

    text = (ROOT / "docs" / "metrics.md").read_text()
    rows = {row.name: row for row in gen_docs.metric_rows()}
    live = [value for value in vars(Telemetry()).values() if isinstance(value, MetricWrapperBase)]
    assert len(live) >= 19
    for metric in live:
        name = metric._name + ("_total" if metric._type == "counter" else "")
        assert name in rows, f"{name} is registered but not found in the source scan"
        assert (rows[name].type, rows[name].labels) == (metric._type, tuple(metric._labelnames))
        assert f"| `{name}` | {metric._type} |" in text
    assert rows["perdix_decisions_total"].labels == ("code",)
    assert "perdix_vertex_parallelism" in rows  # registered outside agent.telemetry


def test_events_and_log_events_are_read_from_the_source() -> None:
    events, logs = gen_docs.emissions()
    assert {"Rescaled", "RescaleRecommended", "RescaleFailed"} <= set(events)
    assert events["RescaleFailed"].levels == {"Warning"}
    # Logged through a variable (monitor.gap / monitor.unavailable) and directly.
    assert {"monitor.gap", "monitor.unavailable", "planner.capped", "loop"} <= set(logs)
    assert logs["monitor.gap"].levels == {"warning"}
    assert "prometheus" not in logs  # a string compared against is not an event


def test_check_mode_reports_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "metrics.md"
    stale.write_text("old\n")
    monkeypatch.setattr(gen_docs, "PAGES", {stale: gen_docs.render_metrics})
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    assert gen_docs.main(["--check"]) == 1
    assert gen_docs.main([]) == 0
    assert gen_docs.main(["--check"]) == 0


def test_event_names_built_in_a_variable_or_an_f_string_are_read() -> None:
    import ast

    function = ast.parse(
        "def report(self, finding, bad):\n"
        "    reason = 'ScalingVetoed' if bad else 'ScalingLimited'\n"
        "    self.events.emit(reason=reason, message='m')\n"
        "    self.log.warning(f'decision.{finding.verdict.value}', code=1)\n"
    ).body[0]
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
    emit = next(c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "emit")
    warning = next(c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "warning")
    assert gen_docs._values(function, emit.keywords[0].value) == ["ScalingVetoed", "ScalingLimited"]
    assert gen_docs._values(function, warning.args[0]) == ["decision.<verdict>"]
    assert gen_docs._event_name("decision.<verdict>") and not gen_docs._event_name("Prometheus rejected it")


def test_the_lab_only_settings_are_listed_apart() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    lab = text.split("## Lab settings", 1)
    assert len(lab) == 2, "the lab's settings section is missing"
    assert "| `simulator.failure_seed` | `PERDIX_SIMULATOR__FAILURE_SEED` |" in lab[1]
    assert "`simulator." not in lab[0]

"""``perdix export-history --from-simulation``: the lab replays a trace, the batch side writes the history."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli.batch import export_from_simulation
from simulator import SimulatorSettings
from spark.export import ExportError
from spark.history import read_history
from tests.conftest import TRACES


def test_simulation_export_replays_the_trace_and_is_idempotent(tmp_path: Path) -> None:
    root = str(tmp_path)
    settings = SimulatorSettings(initial_parallelism=12, seed=3)
    kwargs = dict(job="bank", out=root, start="2026-11-01T22:00", hours=3, simulator=settings)
    result = export_from_simulation(TRACES / "bank_calls.csv", **kwargs)
    again = export_from_simulation(TRACES / "bank_calls.csv", **kwargs)
    assert result.rows == again.rows == 180
    assert [p.date for p in result.partitions] == ["2026-11-01", "2026-11-02"]
    history = read_history(root)
    assert len(history) == 180 and history["time"].is_unique
    assert (history["parallelism"] == 12).all()
    # 12 workers carry bank_calls' first hours, so throughput follows the workload closely.
    assert np.allclose(history["throughput"], history["workload_rate"], rtol=0.1)
    assert history["workload_rate"].iloc[0] == pytest.approx(32647, rel=0.1)


def test_simulation_export_rejects_a_bad_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time,rate\n0,1\n")
    with pytest.raises(ExportError, match="bad.csv:1"):
        export_from_simulation(bad, job="x", out=str(tmp_path / "h"), start="2026-11-01")

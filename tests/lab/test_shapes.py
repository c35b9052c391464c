"""The synthetic workload shapes (scripts/make_shapes.py, traces/shapes/): committed as the script writes them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from simulator import load_trace

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_shapes_are_what_the_script_writes_and_replay_as_six_hour_traces(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "scripts" / "make_shapes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.write(tmp_path)
    committed = sorted((ROOT / "traces" / "shapes").glob("*.csv"))
    assert [p.name for p in committed] == sorted(p.name for p in written)
    for path in written:
        assert path.read_bytes() == (ROOT / "traces" / "shapes" / path.name).read_bytes(), path.name
        trace = load_trace(path)
        rates = np.array([trace.rate_at(t) for t in range(0, 21_601, 60)])
        assert trace.duration_s == 21_600
        assert rates.min() >= module.LOWEST and rates.max() <= module.PEAK
        assert rates.max() > 2 * rates.min() or path.stem == "noisy_flat", "each shape but the noise moves"

"""Write the synthetic workload shapes (``traces/shapes/``): forms no policy was tuned on, beside the real corpus.

Each is six hours at one point per 60 s (the corpus's grid), between 1,000 and 120,000 records/s (the corpus's
peak), built from a formula and, for the noise, a fixed seed:

* ``square_2h``, ``square_20m``: a square wave between two levels, of a period of two hours and of twenty minutes;
* ``ramp_tent``: a linear climb from 10,000 to 120,000/s over three hours and back;
* ``flash_crowd``: 20,000/s with a five-minute crowd at 110,000/s every 45 minutes;
* ``sawtooth_30m``: a climb from 15,000 to 100,000/s over 30 minutes, then a drop at once, again and again;
* ``noisy_flat``: 60,000/s with independent noise of 15 % on every minute's point;
* ``growth``: exponential growth from 10,000 to 120,000/s;
* ``decay_bumps``: a decay from 120,000 towards 10,000/s with a ten-minute bump of 30,000/s every 70 minutes.

Replay them with ``perdix evaluate --trace traces/shapes/NAME.csv ...``; docs/research/shapes.md has the figures.

Run: .venv/bin/python scripts/make_shapes.py [--out traces/shapes]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "traces" / "shapes"
PEAK = 120_000.0
LOWEST = 1_000.0
SEED = 55
"""The noise's seed: the files are the same wherever NumPy's generator draws the same stream (its
``standard_normal`` stream is not promised across NumPy versions; the test compares the committed files with it)."""

Shape = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""A rate per point from the points' minutes (and a generator for noise)."""


def _between(on: np.ndarray, low: float, high: float) -> np.ndarray:
    return np.where(on, high, low)


SHAPES: dict[str, Shape] = {
    "square_2h": lambda m, _: _between((m // 60) % 2 == 1, 20_000.0, 100_000.0),
    "square_20m": lambda m, _: _between((m // 10) % 2 == 1, 30_000.0, 90_000.0),
    "ramp_tent": lambda m, _: 10_000.0 + 110_000.0 * (1.0 - np.abs(m - 180.0) / 180.0),
    "flash_crowd": lambda m, _: _between(((m % 45) >= 20) & ((m % 45) < 25), 20_000.0, 110_000.0),
    "sawtooth_30m": lambda m, _: 15_000.0 + 85_000.0 * ((m % 30) / 30.0),
    "noisy_flat": lambda m, rng: 60_000.0 * (1.0 + 0.15 * rng.standard_normal(m.size)),
    "growth": lambda m, _: 10_000.0 * np.exp(np.log(12.0) * m / 360.0),
    "decay_bumps": lambda m, _: (
        10_000.0 + 110_000.0 * np.exp(-m / 90.0) + _between(((m % 70) >= 50) & ((m % 70) < 60), 0.0, 30_000.0)
    ),
}


def shape(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(time_s, rate)`` of one shape: 361 points, one a minute."""
    minutes = np.arange(361, dtype=float)
    rate = SHAPES[name](minutes, np.random.default_rng(SEED))
    return (minutes * 60).astype(int), np.clip(rate, LOWEST, PEAK)


def write(out: Path) -> list[Path]:
    """Write every shape to ``out/NAME.csv`` (``time_s,rate``); returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SHAPES:
        times, rate = shape(name)
        path = out / f"{name}.csv"
        path.write_text("time_s,rate\n" + "".join(f"{t},{r:.1f}\n" for t, r in zip(times, rate, strict=True)))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="directory for the CSV files (default: traces/shapes)")
    args = parser.parse_args()
    for path in write(args.out):
        print(path)


if __name__ == "__main__":
    main()

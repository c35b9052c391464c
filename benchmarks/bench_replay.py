"""Six-hour replays of both shipped traces: Daedalus vs static at max parallelism.

Prints wall time per replay, worker-hours, rescales, SLO misses, records lost and loop latency p95.
Run: .venv/bin/python -m benchmarks.bench_replay [--hours 6]
"""

from __future__ import annotations

import argparse
import time

from agent.logging import configure_logging
from benchmarks.common import SHIPPED_TRACES, TRACES
from lab.replay import replay
from lab.settings import load_lab_settings
from simulator import load_trace


def main() -> None:
    """Replay each trace under each policy and print one table row per run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--policies", default="daedalus,static")
    args = parser.parse_args()
    configure_logging("console", "error")
    header = (
        f"{'trace':<11} {'policy':<9} {'wall s':>7} {'worker-h':>9} {'rescales':>8} {'slo miss':>8} "
        f"{'lag>tgt s':>9} {'lost':>5} {'loop p95 ms':>11} {'wape med':>8} {'rec err med':>11}"
    )
    print(header)
    print("-" * len(header))
    for name in SHIPPED_TRACES:
        trace = load_trace(TRACES / f"{name}.csv")
        for policy in args.policies.split(","):
            settings = load_lab_settings(None, {"policy": policy})
            start = time.perf_counter()
            s = replay(trace, settings, hours=args.hours).summary
            wall = time.perf_counter() - start
            wape = "-" if s["forecast_wape_median"] is None else f"{s['forecast_wape_median']:.3f}"
            rec = "-" if s["recovery_error_median"] is None else f"{s['recovery_error_median']:.3f}"
            print(
                f"{name:<11} {policy:<9} {wall:7.1f} {s['worker_hours']:9.2f} {s['rescales']:8d} "
                f"{s['slo_misses']:8d} {s['lag_over_target_s']:9d} {s['records_lost']:5d} "
                f"{s['loop_latency_p95_ms']:11.1f} {wape:>8} {rec:>11}"
            )


if __name__ == "__main__":
    main()

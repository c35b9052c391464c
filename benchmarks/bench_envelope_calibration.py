"""Calibration of the rise envelope: does the bound it gives cover the realised peak at its stated rate?

The agent plans a decision that must hold for a lead ``L`` against ``level × ratio(L)``, the
``forecast_quantile`` of the workload's own past rises within ``L`` (``models.forecast.envelope``). For every
trace of a corpus half this benchmark feeds the envelope the simulated job's workload one loop (60 s) at a
time, as the agent does, and at every loop after the first half hour compares, for each lead, the bound with
the highest 10-s mean the workload then reached within the lead. A calibrated bound at quantile ``q`` is
exceeded ``1 - q`` of the time; one exceeded less is higher than it says (it costs workers), one exceeded more
lower (it costs misses). Both forms are measured: the rises from every past moment (*unconditional*) and those
from moments where the workload stood in the same part of its recent range as now (*conditioned*), overall
and from the top third of the range, where the unconditional envelope expects the rises of the troughs.
A third form is the conformal bound of ``upper_bound: forecast_errors`` (``models.forecast.conformal``): the
agent's forecaster (its settings' defaults) forecasts at every loop, and the bound is the forecast's peak within
the lead times the quantile of how far the workload went above the earlier forecasts' peaks (conditioned on the
part of the range, as the agent reads it); before twenty forecasts of a lead are scored the envelope stands in
and the loop is not counted for that form.

Run: .venv/bin/python -m benchmarks.bench_envelope_calibration [--half dev|held-out|all] [--hours 6]
     [--quantile 0.8] [--jobs 2] [--traces NAME,...]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from agent.analyze.forecasting import forecaster_config
from lab.corpus import CorpusTrace, select
from lab.inline import InlineExecutor
from lab.settings import load_lab_settings
from models.forecast import WorkloadForecaster
from models.forecast.conformal import ForecastErrors
from models.forecast.envelope import POSITION_BINS, RiseEnvelope
from simulator import SimulatedFlinkJob, load_trace

LEADS_S = (60, 180, 300, 600)
"""Leads judged: a loop, a cheap scale-in's hold, the default stabilization window, ten minutes."""
LOOP_S = 60
WARMUP_S = 1800
RESOLUTION_S = 10

FORMS = ("unconditional", "conditioned", "forecast errors", "errors over level")

Row = tuple[str, int, int, bool, float, float]
"""(trace, form (an index of FORMS), lead, from the top third, covered (0/1), bound / level)."""


def calibrate(trace: CorpusTrace, hours: float, quantile: float) -> list[Row]:
    """Every (form, lead, loop) comparison of one trace."""
    settings = load_lab_settings(None, {"policy": "daedalus"})
    job = SimulatedFlinkJob(load_trace(trace.path), settings.simulator)
    duration = int(min(hours * 3600, job.trace.duration_s))
    workload = job.environment.workload(0, duration)
    tens = workload[: duration // RESOLUTION_S * RESOLUTION_S].reshape(-1, RESOLUTION_S).mean(axis=1)
    rows: list[Row] = []
    for form in range(len(FORMS)):
        envelope = RiseEnvelope(quantile=quantile, conditioned=form == 1)
        errors = ForecastErrors(quantile=quantile) if form >= 2 else None
        forecaster = (
            WorkloadForecaster(forecaster_config(settings), executor=InlineExecutor()) if errors is not None else None
        )
        for end in range(LOOP_S, duration - max(LEADS_S) + 1, LOOP_S):
            loop = workload[end - LOOP_S : end]
            level = float(loop.mean())
            envelope.update(loop)
            part = envelope.part(level)
            bound_at: np.ndarray | None = None
            if forecaster is not None and errors is not None:
                errors.update(np.arange(end - LOOP_S, end, dtype=float), loop)
                forecast = forecaster.step(loop).values
                if forecast is not None:
                    floor = level if form == 3 else None
                    bound_at = errors.upper(forecast, part=part, level=floor)
                    errors.record(float(end), forecast, part=part, level=floor)
            if end < WARMUP_S or (errors is not None and bound_at is None):
                continue
            top = part == POSITION_BINS - 1
            for lead in LEADS_S:
                bound = float(bound_at[lead - 1]) if bound_at is not None else level * envelope.ratio(lead, level)
                realised = float(tens[end // RESOLUTION_S : (end + lead) // RESOLUTION_S].max())
                rows.append((trace.name, form, lead, top, float(realised <= bound), bound / level))
    return rows


def main() -> None:
    """Print the coverage and the mean bound over the level, per form and lead, overall and from the top third."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="dev", choices=("dev", "held-out", "all"))
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--quantile", type=float, default=0.8)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--traces", default="", help="comma-separated trace names of the half (default: all of it)")
    args = parser.parse_args()
    started = time.perf_counter()
    traces = select(args.half)
    if args.traces:
        names = set(args.traces.split(","))
        traces = [trace for trace in traces if trace.name in names]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = [
            row
            for rows in pool.map(calibrate, traces, [args.hours] * len(traces), [args.quantile] * len(traces))
            for row in rows
        ]
    data = np.asarray([(c, lead, top, covered, height) for _, c, lead, top, covered, height in rows], dtype=float)
    print(
        f"{args.half} half, {len(traces)} traces, {args.hours:g} h each, quantile {args.quantile:g} "
        f"(calibrated: covered {args.quantile:.0%} of the time)"
    )
    print(
        f"{'form':<16} {'lead':>5} {'covered':>8} {'bound/level':>11} "
        f"{'covered (top third)':>20} {'bound/level (top)':>18}"
    )
    for form, name in enumerate(FORMS):
        for lead in LEADS_S:
            mask = (data[:, 0] == form) & (data[:, 1] == lead)
            top = mask & (data[:, 2] == 1.0)
            print(
                f"{name:<16} {lead:>5} {data[mask, 3].mean():>8.3f} {data[mask, 4].mean():>11.3f} "
                f"{data[top, 3].mean():>20.3f} {data[top, 4].mean():>18.3f}  ({int(mask.sum())} loops)"
            )
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

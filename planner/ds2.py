"""DS2 (paper 002, OSDI 2018): parallelism from true processing and output rates.

An instance's *true* processing rate is what it processes per second of useful time,
``lambda_p = R_prc / W_u`` (eq. 1), and its true output rate ``lambda_o = R_psd / W_u`` (eq. 2). The
optimal parallelism of operator ``i`` is the aggregated true output rate of its upstream operators,
each at its own optimal parallelism, over the average true processing rate per instance of ``i``
(eq. 7), computed in one traversal from the sources (eq. 8)::

    pi_i = ceil( sum_j A_ji * o_j[lambda_o]* / (o_i[lambda_p] / p_i) )
    o_j[lambda_o]* = (o_j[lambda_o] / o_j[lambda_p]) * sum_u A_uj * o_u[lambda_o]*

The paper assumes no skew and linear scaling (section 3.3); it says so, and so does this code: on a
skewed job DS2 under-provisions the hottest instance.

On the single-vertex job (one operator after the source) it reduces to ``ceil(source rate / mean
true rate per worker)``, with the useful time of a worker taken from its CPU load (the only useful-time
signal the agent's monitor has, as Flink's ``busyTimeMsPerSecond`` is to the Flink autoscaler).
The scaling manager uses DS2's settings from the Flink experiments: one policy interval per loop, a
warm-up after each rescale (the shared grace period, without the recovery hold) and an activation
time of one interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIN_USEFUL_FRACTION = 0.01
"""Below this useful-time fraction a true rate is undefined (eq. 1 with W_u -> 0)."""


@dataclass(frozen=True)
class OperatorRates:
    """One operator of the logical dataflow over a policy interval (DS2's instrumentation)."""

    name: str
    parallelism: int
    true_processing_rate: float
    """Aggregated true processing rate ``o_i[lambda_p]``: sum over instances (eq. 5), records/s."""
    true_output_rate: float
    """Aggregated true output rate ``o_i[lambda_o]`` (eq. 6), records/s."""
    upstream: tuple[str, ...] = ()
    """Operators that output to this one; empty means it reads the source."""


def true_rate(observed_rate: float, useful_fraction: float) -> float | None:
    """An instance's true rate: observed records/s over its useful-time fraction (eq. 1-4); None if undefined."""
    if useful_fraction < MIN_USEFUL_FRACTION or observed_rate < 0:
        return None
    return observed_rate / min(useful_fraction, 1.0)


def ds2_parallelism(
    operators: Sequence[OperatorRates],
    source_rate: float,
    *,
    target_ratio: float = 1.0,
    max_parallelism: int | None = None,
) -> dict[str, int]:
    """Optimal parallelism per operator (eq. 7 and 8); ``operators`` in topological order.

    Operators without upstream read the source at ``source_rate`` records/s (times ``target_ratio``,
    DS2's over-provisioning knob).

    >>> ops = [OperatorRates("map", 2, 20_000, 20_000), OperatorRates("count", 1, 5_000, 500, ("map",))]
    >>> ds2_parallelism(ops, 30_000)
    {'map': 3, 'count': 6}
    """
    names = {op.name for op in operators}
    optimal_output: dict[str, float] = {}
    result: dict[str, int] = {}
    for op in operators:
        missing = [u for u in op.upstream if u not in optimal_output]
        if missing:
            unknown = [u for u in missing if u not in names]
            raise ValueError(
                f"operator {op.name}: upstream {missing} "
                + ("unknown" if unknown else "not before it (operators must be in topological order)")
            )
        if op.parallelism < 1 or op.true_processing_rate <= 0:
            raise ValueError(f"operator {op.name}: needs parallelism >= 1 and a positive true processing rate")
        incoming = sum(optimal_output[u] for u in op.upstream) if op.upstream else source_rate * target_ratio
        per_instance = op.true_processing_rate / op.parallelism
        # The epsilon keeps a rate that exactly matches k instances from asking for k + 1.
        pi = max(1, math.ceil(incoming / per_instance - 1e-9))
        if max_parallelism is not None:
            pi = min(pi, max_parallelism)
        result[op.name] = pi
        selectivity = op.true_output_rate / op.true_processing_rate
        optimal_output[op.name] = selectivity * incoming
    return result


def mean_true_rate(throughput: Mapping[str, float], useful: Mapping[str, float]) -> float | None:
    """Average true processing rate per instance over the instances where it is defined."""
    rates = [
        rate
        for worker, observed in throughput.items()
        if worker in useful and (rate := true_rate(observed, useful[worker])) is not None and rate > 0
    ]
    return sum(rates) / len(rates) if rates else None

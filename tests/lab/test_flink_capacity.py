"""How a capacity is read from the fixed-rate probes (no cluster: the probes are given)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from lab.flink.capacity import Capacity, Probe, zero_growth_rate


def probe(rate: float, growth: float) -> Probe:
    return Probe(4, rate, growth, max(growth, 0.0) * 15, bounded=growth < 0.01 * rate and growth * 15 < rate)


def test_the_capacity_is_where_the_backlog_stops_growing_not_the_bracket_s_middle() -> None:
    # Above 3,700/s the busiest readers (half the input) fall behind by half of what is offered beyond it.
    probes = [probe(r, max(0.0, 0.5 * (r - 3700.0))) for r in (3358.0, 3627.0, 3917.0, 3772.0, 3844.0, 3808.0)]
    assert [p.bounded for p in probes] == [True, True, False, True, False, False]  # +36/s at 3,772 passes the 1 %
    capacity = Capacity(4, 3650.0, 3772.0, 3808.0, tuple(probes))
    assert zero_growth_rate(probes) == pytest.approx(3700.0)
    assert capacity.rate == pytest.approx(3700.0) and (3772.0 + 3808.0) / 2 > 3789.0


def test_without_two_probes_that_grew_the_bracket_s_middle_or_the_saturated_estimate_stands() -> None:
    one = (probe(3600.0, 0.0), probe(3900.0, 100.0))
    assert zero_growth_rate(one) is None and Capacity(4, 3650.0, 3600.0, 3900.0, one).rate == 3750.0
    assert Capacity(4, 3650.0, 0.0, math.inf, ()).rate == 3650.0


def test_the_line_is_kept_within_what_the_probes_show() -> None:
    # Noise that tilts the line past a rate whose backlog held still, or past the lowest rate it grew in.
    steep = [probe(3600.0, 0.0), probe(3800.0, 40.0), probe(3810.0, 45.0), probe(3900.0, 1000.0)]
    assert zero_growth_rate(steep) == pytest.approx(3800.0)
    flat = [probe(3750.0, 0.5), probe(3800.0, 100.0), probe(3900.0, 101.0)]
    assert zero_growth_rate(flat) == pytest.approx(3750.0)
    assert zero_growth_rate([probe(3800.0, 100.0), probe(3900.0, 50.0)]) is None  # growth falling with the rate


def test_a_measurement_read_back_from_its_json_is_read_alike() -> None:
    probes = tuple(probe(r, max(0.0, 0.5 * (r - 3700.0))) for r in (3600.0, 3800.0, 3900.0))
    for capacity in (Capacity(4, 3650.0, 3600.0, 3800.0, probes), Capacity(1, 990.0, 0.0, math.inf, ())):
        again = Capacity.from_dict(json.loads(json.dumps(asdict(capacity), default=str)))
        assert again == capacity and again.rate == capacity.rate

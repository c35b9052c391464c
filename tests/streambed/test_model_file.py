"""The capacity model file: round trip, the agent's prior mapping, rejection of bad or newer files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from models.streambed import (
    SCHEMA_VERSION,
    CapacityModelError,
    CapacityModelFile,
    Surrogate,
    load_capacity_prior,
    read_capacity_model,
    write_capacity_model,
)


def model() -> CapacityModelFile:
    surrogate = Surrogate("sqrt", 12.5, 50_000.0, -30_000.0)
    return CapacityModelFile(
        job="windowed-aggregation",
        surrogate=surrogate,
        memory_mb=4096.0,
        slots_per_scale_out=2,
        capacities={n: surrogate.capacity_at(2 * n, 4096.0) for n in range(1, 9)},
        validation={"selection": "loocv", "loocv_rmse": 1234.5, "extrapolation_rmse": None},
        target_rate=200_000.0,
        task_slots_for_target=31,
        observations=({"task_slots": 3, "memory_mb": 1024.0, "capacity": 17_000.0, "parallelism": [1, 1, 1]},),
        testbed_runs=9,
        extra={"stop_reason": "reached 20 measurements"},
    )


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = write_capacity_model(tmp_path / "sub" / "capacity.json", model())
    loaded = read_capacity_model(path)
    assert loaded == model()
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]  # no temporary file left behind


def test_the_prior_is_the_capacity_per_scale_out(tmp_path: Path) -> None:
    path = write_capacity_model(tmp_path / "capacity.json", model())
    prior = load_capacity_prior(path)
    assert prior == {
        n: pytest.approx(Surrogate("sqrt", 12.5, 50_000.0, -30_000.0).capacity_at(2 * n, 4096.0)) for n in range(1, 9)
    }
    assert all(isinstance(k, int) and isinstance(v, float) for k, v in prior.items())


def document(**changes: Any) -> dict[str, Any]:
    data = model().to_dict()
    for dotted, value in changes.items():
        target = data
        *parents, leaf = dotted.split("__")
        for key in parents:
            target = target[key]
        if value is KeyError:
            del target[leaf]
        else:
            target[leaf] = value
    return data


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema_version": SCHEMA_VERSION + 1}, "newer than this Perdix reads"),
        ({"schema_version": "1"}, "schema_version must be a positive integer"),
        ({"schema_version": KeyError}, "schema_version must be a positive integer"),
        ({"kind": "something-else"}, "kind must be"),
        ({"surrogate__family": "cubic"}, "surrogate.family"),
        ({"surrogate__slots_slope": "fast"}, "surrogate.slots_slope must be a finite number"),
        ({"capacities": {}}, "capacities must be a non-empty object"),
        ({"capacities": {"two": 1.0}}, "not an integer scale-out"),
        ({"capacities": {"0": 1.0}}, "scale-out >= 1"),
        ({"capacities": {"1": -5.0}}, "must be within 0..1e.12 records/s, got -5"),
        ({"capacities": {"1": 1e308}}, "must be within 0..1e.12 records/s, got 1e.308"),
        ({"capacities": {"1": None}}, "finite number"),
        ({"memory_mb": 0}, "memory_mb must be positive"),
        ({"slots_per_scale_out": 0}, "slots_per_scale_out must be a positive integer"),
        ({"validation": KeyError}, "missing key 'validation'"),
    ],
)
def test_bad_documents_are_rejected_naming_file_and_reason(
    tmp_path: Path, changes: dict[str, Any], reason: str
) -> None:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(document(**changes)))
    with pytest.raises(CapacityModelError, match=reason) as error:
        load_capacity_prior(path)
    assert str(path) in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "", "\udcff"])
def test_corrupt_files_are_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "capacity.json"
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    with pytest.raises(CapacityModelError, match=str(path)):
        load_capacity_prior(path)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CapacityModelError, match="no such file"):
        load_capacity_prior(tmp_path / "absent.json")


def test_an_older_reader_field_layout_is_read_by_version(tmp_path: Path) -> None:
    # Optional sections may be absent: a minimal version-1 file is valid.
    data = document(inverse=KeyError, observations=KeyError, testbed_runs=KeyError, extra=KeyError)
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(data))
    loaded = read_capacity_model(path)
    assert loaded.target_rate is None and loaded.observations == () and loaded.capacities == model().capacities

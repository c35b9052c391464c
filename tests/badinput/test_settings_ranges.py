"""Every numeric setting of the lab's tree (the agent's and the simulator's): a value no run can use is refused
when the settings load, in one line naming the file and the dotted key.

Generated from the models themselves, so a new setting is tried as soon as it exists: every number is tried
infinite and NaN, and past each bound it declares. In-process (load_settings is what every command calls;
tests/badinput/test_config.py runs the same through the installed perdix).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent.settings import ConfigError, load_settings
from lab.settings import LabSettings


def _numbers(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, type, dict[str, float]]]:
    """(dotted key, int or float, its declared bounds) of every numeric setting under ``model``."""
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        if type(annotation) is types.UnionType or typing.get_origin(annotation) is typing.Union:
            annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _numbers(annotation, (*prefix, name))
        elif annotation in (int, float):
            bounds = {
                type(meta).__name__.lower(): getattr(meta, type(meta).__name__.lower())
                for meta in field.metadata
                if type(meta).__name__ in ("Ge", "Gt", "Le", "Lt")
            }
            yield ".".join((*prefix, name)), annotation, bounds


def _bad_values(kind: type, bounds: dict[str, float]) -> Iterator[tuple[str, Any]]:
    yield "infinite", float("inf")
    yield "minus infinite", float("-inf")
    yield "NaN", float("nan")
    step = 1 if kind is int else 1e-6
    if "ge" in bounds:
        yield "below its minimum", bounds["ge"] - max(step, abs(bounds["ge"]) * 1e-3)
    if "gt" in bounds:
        yield "at its exclusive minimum", bounds["gt"]
    if "le" in bounds:
        yield "above its maximum", bounds["le"] + max(step, abs(bounds["le"]) * 1e-3)
    if "lt" in bounds:
        yield "at its exclusive maximum", bounds["lt"]
    if kind is int:
        yield "not a whole number", 1.5


CASES = [
    pytest.param(key, value, id=f"{key} {label}")
    for key, kind, bounds in _numbers(LabSettings)
    for label, value in _bad_values(kind, bounds)
]


def _yaml_number(value: Any) -> str:
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return repr(value)


@pytest.mark.parametrize(("key", "value"), CASES)
def test_a_number_no_run_can_use_is_refused_naming_the_file_and_key(tmp_path: Path, key: str, value: Any) -> None:
    config = tmp_path / "perdix.yaml"
    *parents, leaf = key.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parents)]
    lines.append(f"{'  ' * len(parents)}{leaf}: {_yaml_number(value)}")
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config, model=LabSettings)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{config}: "), message
    assert key in message or key.rpartition(".")[0] in message, message


def test_every_numeric_setting_is_tried() -> None:
    """The sweep covers the tree: the settings that guard the loop's timers are among the cases."""
    keys = {key for key, _, _ in _numbers(LabSettings)}
    assert {"loop_interval_s", "prometheus.timeout_s", "simulator.partitions", "max_parallelism"} <= keys
    assert len(CASES) >= 4 * len(keys)

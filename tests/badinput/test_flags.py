"""Every numeric flag of every command: a value the command cannot run with (NaN, infinite, past its range,
not a number) exits 2 with one line naming the flag, before any work.

Generated from the typer application, so a new flag is tried as soon as it exists. The sweep calls the
entry point in-process (``cli.main``: the console script's own function, with its one-line handler) to
stay fast; the reproductions below run the installed ``perdix``.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest
from typer.models import OptionInfo

from cli import main
from cli.app import app
from tests.badinput.conftest import assert_one_line, good_trace, run_perdix

REQUIRED = {
    "simulate": ["--trace", "t.csv", "--hours", "0.2", "--out", "out"],
    "evaluate": ["--trace", "t.csv", "--hours", "0.2", "--out", "out"],
    "export-history": ["--job", "j", "--out", "history", "--from-simulation", "t.csv"],
    "capacity-plan": ["--target-rate", "1000", "--out", "model.json"],
    "retrain": ["--history", "history", "--registry", "registry", "--serial"],
    "run": ["--dry-run"],
}
"""Valid values of each command's other options: the bad flag is then the only thing wrong."""


def _numeric_flags() -> list[tuple[str, str, type, float | None]]:
    """(command, flag, int or float, the flag's maximum if it declares one) of every numeric flag."""
    flags = []
    for command in app.registered_commands:
        assert command.callback is not None
        hints = typing.get_type_hints(command.callback)
        for name, parameter in inspect.signature(command.callback).parameters.items():
            option = parameter.default
            if isinstance(option, OptionInfo) and hints.get(name) in (int, float):
                flag = next(decl for decl in option.param_decls or () if decl.startswith("--"))
                flags.append((command.name or command.callback.__name__, flag, hints[name], option.max))
    return flags


def _others(command: str, flag: str) -> list[str]:
    """The command's valid options but ``flag``."""
    args = REQUIRED.get(command, [])
    out: list[str] = []
    index = 0
    while index < len(args):
        takes_value = index + 1 < len(args) and not args[index + 1].startswith("--")
        if args[index] != flag:
            out += args[index : index + 1 + takes_value]
        index += 1 + takes_value
    return out


FLAGS = _numeric_flags()
VALUES = {
    float: ["nan", "inf", "-inf", "1e400", "-1e300", "fast"],
    int: ["nan", "1.5", "-99999999999999999999", "many"],
}


def _past(maximum: float | None, kind: type) -> list[str]:
    if maximum is None:
        return []
    return [str(int(maximum) + 1) if kind is int else repr(float(maximum) * 1.5)]


CASES = [
    pytest.param(command, flag, value, id=f"{command} {flag} {value}")
    for command, flag, kind, maximum in FLAGS
    for value in VALUES[kind] + _past(maximum, kind)
]


@pytest.mark.parametrize(("command", "flag", "value"), CASES)
def test_a_numeric_flag_out_of_its_range_is_one_line_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flag: str,
    value: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    good_trace(tmp_path / "t.csv")
    with pytest.raises(SystemExit) as exited:
        main([command, f"{flag}={value}", *_others(command, flag)])
    captured = capsys.readouterr()
    assert exited.value.code == 2, captured.err
    assert "Traceback" not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    option = flag.removeprefix("--").replace("-", "_")
    assert flag in lines[0] or option in lines[0], lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.csv"]  # nothing written


def test_every_command_with_a_numeric_flag_is_swept() -> None:
    commands = {command for command, _, _, _ in FLAGS}
    assert {"simulate", "evaluate", "export-history", "capacity-plan", "retrain"} <= commands
    assert ("simulate", "--speed", float) in {(command, flag, kind) for command, flag, kind, _ in FLAGS}


@pytest.mark.parametrize("speed", ["nan", "inf", "0", "-1", "1e9"])
def test_serve_metrics_refuses_a_speed_it_cannot_keep(tmp_path: Path, speed: str) -> None:
    """--speed nan killed the exporter's thread while the process went on serving frozen metrics."""
    trace = good_trace(tmp_path / "t.csv")
    result = run_perdix(
        "simulate", "--trace", trace, "--serve-metrics", "127.0.0.1:0", "--speed", speed, cwd=tmp_path, timeout=60
    )
    assert_one_line(result, "--speed", speed.replace("1e9", "1000000000.0").replace("inf", "inf"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["simulate", "--trace", "t.csv", "--hours", "0", "--out", "out"], "--hours 0: shorter than one loop"),
        (["simulate", "--trace", "t.csv", "--hours", "-1", "--out", "out"], "'--hours'"),
        (["simulate", "--trace", "t.csv", "--hours", "inf", "--out", "out"], "'--hours'"),
        (["evaluate", "--trace", "t.csv", "--hours", "0.001", "--out", "out"], "--hours 0.001: shorter than one loop"),
        (["export-history", "--from-simulation", "t.csv", "--job", "j", "--out", "h", "--hours", "-0.5"], "'--hours'"),
        (["capacity-plan", "--target-rate", "0", "--out", "m.json"], "--target-rate: must be above 0"),
        (["simulate", "--trace", "t.csv", "--failures-per-hour", "nan", "--out", "out"], "'--failures-per-hour'"),
        (
            ["simulate", "--trace", "t.csv", "--target-recovery-time-s", "inf", "--out", "out"],
            "command line: target_recovery_time_s",
        ),
        (["simulate", "--trace", "t.csv", "--seed", "-3", "--out", "out"], "command line: simulator.seed"),
        (["simulate", "--trace", "t.csv", "--bogus", "--out", "out"], "No such option: --bogus"),
        (["simulate", "--hours", "0.2"], "Missing option '--trace'"),
        (["evaluate", "--policies", "nosuch", "--trace", "t.csv", "--out", "out"], "unknown policy 'nosuch'"),
        (["evaluate", "--corpus", "bogus", "--out", "out"], "--corpus: 'bogus'"),
        (
            [
                "export-history",
                "--prometheus",
                "http://127.0.0.1:1",
                "--since",
                "yesterday-ish",
                "--job",
                "j",
                "--out",
                "h",
            ],
            "--since: not a time",
        ),
        (["export-history", "--from-simulation", "t.csv", "--job", "a/b", "--out", "h"], "job name 'a/b'"),
        (["export-history", "--job", "j", "--out", "h"], "give exactly one of --prometheus URL or --from-simulation"),
        (
            ["export-history", "--from-simulation", "t.csv", "--job", "j", "--out", "h", "--until", "2020-01-01"],
            "--until applies to --prometheus only",
        ),
        (
            ["export-history", "--prometheus", "http://127.0.0.1:1", "--since", "1d", "--job", "j", "--out", "h"]
            + ["--hours", "1"],
            "--hours and --parallelism apply to --from-simulation only",
        ),
        (
            ["capacity-plan", "--target-rate", "100", "--out", "m.json", "--probes", "3"],
            "--probes: only for --testbed flink",
        ),
        (
            ["capacity-plan", "--target-rate", "100", "--out", "m.json", "--testbed", "moon"],
            "--testbed: unknown testbed",
        ),
        (["retrain", "--history", "nowhere", "--registry", "r", "--serial"], "nowhere"),
        (
            ["simulate", "--trace", "t.csv", "--serve-metrics", "localhost", "--out", "out"],
            "--serve-metrics: expected HOST:PORT",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_other_bad_flags_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    good_trace(tmp_path / "t.csv")
    result = run_perdix(*args, cwd=tmp_path, timeout=120)
    assert_one_line(result, fragment)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.csv"]

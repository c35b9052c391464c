"""Bad trace files, for every command that reads a trace: one line naming the file (and the line)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from simulator.trace import MAX_TRACE_BYTES
from tests.badinput.conftest import assert_one_line, run_perdix

Writer = Callable[[Path], Path]


def _bytes(data: bytes) -> Writer:
    def write(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return write


def _text(text: str) -> Writer:
    return _bytes(text.encode())


def _random(path: Path) -> Path:
    path.write_bytes(os.urandom(4096).replace(b"\n", b"\xff"))  # no line breaks: never valid UTF-8 text by chance
    return path


def _sparse(path: Path) -> Path:
    with path.open("wb") as handle:
        handle.truncate(MAX_TRACE_BYTES + 1)
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


def _missing(path: Path) -> Path:
    return path


# (case, writer, what the line says besides the file's name)
TRACES: list[tuple[str, Writer, str]] = [
    ("binary", _random, "not UTF-8"),
    ("line over the csv field limit", _text("time_s,rate\n0," + "9" * 140_000 + "\n"), ":2: line of 140,003"),
    ("latin-1 byte", _bytes(b"time_s,rate\n0,1\n60,2\xe9\n"), ":3: trace is not UTF-8"),
    ("NUL byte", _bytes(b"time_s,rate\n0,1\n60,\x002\n"), ":3: non-numeric"),
    ("empty file", _text(""), ":1: empty file"),
    ("header only", _text("time_s,rate\n"), "at least 2 points"),
    ("wrong header", _text("t,r\n0,1\n60,1\n"), ":1: expected header"),
    ("one point", _text("time_s,rate\n0,1\n"), "at least 2 points"),
    ("three columns", _text("time_s,rate\n0,1,2\n60,1\n"), ":2: expected 2 columns"),
    ("digits grouped by underscores", _text("time_s,rate\n0,1_000\n60,1000\n"), ":2: non-numeric value"),
    ("not a number", _text("time_s,rate\n0,1\n60,fast\n"), ":3: non-numeric"),
    ("NaN rate", _text("time_s,rate\n0,1\n60,nan\n"), ":3: value is not finite"),
    ("infinite rate", _text("time_s,rate\n0,inf\n60,1\n"), ":2: value is not finite"),
    ("negative rate", _text("time_s,rate\n0,1\n60,-5\n"), ":3: negative rate"),
    ("time going back", _text("time_s,rate\n0,1\n60,1\n30,1\n"), ":4: times must increase"),
    ("rate the simulator cannot count", _text("time_s,rate\n0,1e300\n60,1\n"), ":2: rate 1e+300"),
    ("unterminated quote", _text('time_s,rate\n0,1\n"60,1\n'), ":3:"),
    ("larger than 64 MiB", _sparse, "larger than 64 MiB"),
    ("shorter than a loop", _text("time_s,rate\n0,1\n10,1\n"), "shorter than one loop"),
    ("a directory", _directory, "directory"),
    ("missing", _missing, "No such file"),
]
"""Every class of bad trace."""

COMMON = (
    "binary",
    "line over the csv field limit",
    "latin-1 byte",
    "empty file",
    "larger than 64 MiB",
    "NaN rate",
    "a directory",
    "missing",
)
"""The classes every trace-reading command is tried with (simulate is tried with all)."""


def _command(name: str, trace: Path) -> list[str]:
    return {
        "simulate": ["simulate", "--trace", str(trace), "--hours", "0.2", "--out", "out"],
        "evaluate": ["evaluate", "--trace", str(trace), "--hours", "0.2", "--out", "out", "--policies", "static"],
        "export-history": [
            "export-history",
            "--from-simulation",
            str(trace),
            "--job",
            "j",
            "--out",
            "history",
            "--hours",
            "0.2",
        ],
        "simulate --serve-metrics": ["simulate", "--trace", str(trace), "--serve-metrics", "127.0.0.1:0"],
    }[name]


CASES = [
    pytest.param(command, case, writer, fragment, id=f"{command}: {case}")
    for command in ("simulate", "evaluate", "export-history", "simulate --serve-metrics")
    for case, writer, fragment in TRACES
    if command == "simulate" or case in COMMON
]


@pytest.mark.parametrize(("command", "case", "writer", "fragment"), CASES)
def test_a_bad_trace_is_one_line_naming_the_file(
    tmp_path: Path, command: str, case: str, writer: Writer, fragment: str
) -> None:
    trace = writer(tmp_path / "bad.csv")
    result = run_perdix(*_command(command, trace), cwd=tmp_path, timeout=120)
    assert_one_line(result, "bad.csv", fragment)
    assert not (tmp_path / "out").exists() and not (tmp_path / "history").exists()


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
def test_a_trace_longer_than_a_year_is_refused_unless_hours_cut_it(tmp_path: Path, command: str) -> None:
    """A trace of two points 3,000 years apart replayed for ever with no word (``--hours`` is capped at a year for
    the same reason); with ``--hours`` its first hours replay."""
    trace = _text("time_s,rate\n0,1000\n99999999999,1000\n")(tmp_path / "long.csv")
    uncut = [part for part in _command(command, trace) if part != "0.2"]
    uncut.remove("--hours")
    assert_one_line(run_perdix(*uncut, cwd=tmp_path, timeout=120), "long.csv: trace covers 27,777,778 h", "--hours")
    assert not (tmp_path / "out").exists()
    assert run_perdix(*_command(command, trace), cwd=tmp_path, timeout=300).returncode == 0

"""A bad --out loses no work: it is refused before the first replay, in one line, and nothing is written or lost;
an existing output directory is reused, named with the files the run replaces, and nothing else there is touched."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.badinput.conftest import assert_one_line, good_trace, run_perdix, tree


def _command(name: str, out: str) -> list[str]:
    return {
        "simulate": ["simulate", "--trace", "t.csv", "--hours", "0.2", "--out", out],
        "evaluate": ["evaluate", "--trace", "t.csv", "--hours", "0.2", "--out", out, "--policies", "static"],
        "capacity-plan": ["capacity-plan", "--target-rate", "5000", "--max-runs", "5", "--out", out],
        "export-history": [
            "export-history",
            "--from-simulation",
            "t.csv",
            "--job",
            "j",
            "--hours",
            "0.2",
            "--out",
            out,
        ],
    }[name]


def _a_file(root: Path) -> tuple[str, str]:
    (root / "taken").write_text("precious\n")
    return "taken", "is a file, not a directory"


def _under_a_file(root: Path) -> tuple[str, str]:
    (root / "taken").write_text("precious\n")
    return "taken/out", "taken is a file, so nothing can be made under it"


def _deep_under_a_file(root: Path) -> tuple[str, str]:
    (root / "taken").write_text("precious\n")
    return "taken/a/b/c", "taken is a file, so nothing can be made under it"


def _read_only(root: Path) -> tuple[str, str]:
    (root / "locked").mkdir()
    (root / "locked" / "summary.json").write_text("{}\n")
    (root / "locked").chmod(0o555)
    return "locked", "is not writable"


def _under_read_only(root: Path) -> tuple[str, str]:
    (root / "locked").mkdir()
    (root / "locked").chmod(0o555)
    return "locked/out", "locked is not writable"


def _summary_is_a_directory(root: Path) -> tuple[str, str]:
    (root / "out" / "summary.json").mkdir(parents=True)
    return "out", "summary.json is in the way"


def _name_too_long(root: Path) -> tuple[str, str]:
    return "x" * 300 + "/out", "too long"


def _dangling_link(root: Path) -> tuple[str, str]:
    (root / "link").symlink_to(root / "nowhere" / "deeper")
    return "link", "link"


def _a_file_system_that_takes_no_file(root: Path) -> tuple[str, str]:
    # /proc grants root every mode bit and takes no file: only a file tried says so (to another user the mode
    # bits already do: "/proc is not writable").
    return "/proc/perdix-out", "/proc " + ("cannot be written" if os.geteuid() == 0 else "is not writable")


Setup = Callable[[Path], tuple[str, str]]
# (case, set-up returning (--out, fragment), commands it applies to)
OUTS: list[tuple[str, Setup, tuple[str, ...]]] = [
    ("a file", _a_file, ("simulate", "evaluate", "export-history")),
    ("under a file", _under_a_file, ("simulate", "evaluate", "capacity-plan", "export-history")),
    ("deep under a file", _deep_under_a_file, ("simulate", "evaluate", "capacity-plan")),
    ("read-only directory", _read_only, ("simulate", "evaluate", "export-history")),
    ("under a read-only directory", _under_read_only, ("simulate", "evaluate", "capacity-plan", "export-history")),
    ("an output file that is a directory", _summary_is_a_directory, ("simulate", "evaluate")),
    ("a name too long", _name_too_long, ("simulate", "evaluate", "capacity-plan")),
    ("a dangling symbolic link", _dangling_link, ("simulate", "evaluate")),
    (
        "a file system that takes no file",
        _a_file_system_that_takes_no_file,
        ("simulate", "evaluate", "capacity-plan", "export-history"),
    ),
]

CASES = [
    pytest.param(command, setup, id=f"{command}: {case}") for case, setup, commands in OUTS for command in commands
]


@pytest.mark.parametrize(("command", "setup"), CASES)
def test_a_bad_out_is_refused_before_any_work_and_nothing_is_lost(open_dir: Path, command: str, setup: Setup) -> None:
    good_trace(open_dir / "t.csv")
    out, fragment = setup(open_dir)
    before = tree(open_dir)
    # Root writes through mode bits: a read-only directory is tried as a user it binds.
    result = run_perdix(*_command(command, out), cwd=open_dir, as_nobody="read_only" in setup.__name__, timeout=120)
    before.pop(".cache", None)
    after = {key: value for key, value in tree(open_dir).items() if not key.startswith(".cache")}
    assert_one_line(result, f"--out {out}", fragment)
    assert after == before  # nothing written, nothing lost


@pytest.mark.parametrize(
    ("command", "replaced"),
    [
        ("simulate", "summary.json, replay.png"),
        ("evaluate", "summary.json, report.md, t.png"),
    ],
)
def test_an_existing_out_is_reused_naming_what_it_replaces_and_touching_nothing_else(
    tmp_path: Path, command: str, replaced: str
) -> None:
    good_trace(tmp_path / "t.csv")
    first = run_perdix(*_command(command, "out"), cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "will replace" not in first.stderr
    (tmp_path / "out" / "notes.txt").write_text("mine\n")
    (tmp_path / "out" / "sub").mkdir()
    (tmp_path / "out" / "sub" / "keep.csv").write_text("a,b\n")
    second = run_perdix(*_command(command, "out"), cwd=tmp_path, timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"--out out: will replace {replaced}; nothing else in it is touched" in second.stderr
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine\n"
    assert (tmp_path / "out" / "sub" / "keep.csv").read_text() == "a,b\n"
    assert "Traceback" not in second.stderr


def test_capacity_plan_says_it_replaces_an_existing_model(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text("{}\n")
    result = run_perdix(*_command("capacity-plan", "model.json"), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "--out model.json: will replace it" in result.stderr

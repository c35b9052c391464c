"""Code and documentation say what the code does, not how it came to be.

The history of the work lives in the commits and the research record (docs/research/, written as
experiments). Everywhere else a tracked file must not narrate it: the order of the work, the tracker's
numbers, the trials that were dropped. The patterns, and the lines each must catch or pass, are the check's
vocabulary in ``tests/data/narration.toml``, which passes the check itself; they are narrow on purpose, so that a
Flink or Spark session cluster, a ``SparkSession``, pytest's fixture scopes and a loop's round, which are what the
code does, pass.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VOCABULARY = Path(__file__).with_name("data") / "narration.toml"
"""The patterns and their samples, the words they look for written {name} (stored in pieces under [words])."""

EXEMPT_PREFIXES = ("docs/research/",)
"""The lab's record of its experiments, where the order of the work is part of the story."""
EXEMPT_FILES = {"CHANGELOG.md"}
"""The release notes (history by design)."""
EXEMPT_SUFFIXES = (".csv", ".parquet", ".png", ".jar", ".json.gz")

_WORDS = tomllib.loads(VOCABULARY.read_text(encoding="utf-8"))
_FILLED = {"ordinals": _WORDS["ordinals"], **{name: "".join(pieces) for name, pieces in _WORDS["words"].items()}}


def _filled(text: str) -> str:
    """``text`` with every ``{name}`` of the vocabulary's words (and ``{ordinals}``) filled in."""
    return re.sub(r"\{(\w+)\}", lambda m: _FILLED.get(m.group(1), m.group(0)), text)


NARRATION = {entry["name"]: re.compile(_filled(entry["regex"]), re.IGNORECASE) for entry in _WORDS["pattern"]}
"""What narration looks like; each name says what a hit narrates."""


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = []
    for name in listed.decode().split("\0"):
        if not name or name in EXEMPT_FILES or name.startswith(EXEMPT_PREFIXES) or name.endswith(EXEMPT_SUFFIXES):
            continue
        path = ROOT / name
        if path.is_file():
            paths.append(path)
    return paths


def narration_in(text: str) -> list[tuple[int, str, str]]:
    """(line number, what it narrates, the line) of every hit in ``text``."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern in NARRATION.items():
            if pattern.search(line):
                hits.append((number, what, line.strip()))
    return hits


def test_no_tracked_file_narrates_how_the_code_came_to_be() -> None:
    files = _tracked_text_files()
    assert len(files) > 100, "git ls-files found too few files: is this a checkout?"
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        hits += [f"{path.relative_to(ROOT)}:{n}: {what}: {line[:120]}" for n, what, line in narration_in(text)]
    assert not hits, "say what the code does (experiments go to docs/research/):\n" + "\n".join(hits)


CAUGHT = [_filled(line) for line in _WORDS["samples"]["caught"]]
"""Made-up lines of narration, their words filled in."""
PASSED = [_filled(line) for line in _WORDS["samples"]["passed"]]
"""Lines of what the code does, their words filled in."""


@pytest.mark.parametrize("line", CAUGHT)
def test_narration_is_caught(line: str) -> None:
    assert narration_in(line), line


@pytest.mark.parametrize("line", PASSED)
def test_what_the_code_does_passes(line: str) -> None:
    assert not narration_in(line), line


def test_every_pattern_catches_a_sample() -> None:
    caught = {what for line in CAUGHT for _, what, _ in narration_in(line)}
    assert caught == set(NARRATION), set(NARRATION) - caught

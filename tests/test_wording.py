"""Code and documentation say what the code does, not how it came to be.

The history of the work lives in the commits and the research record (docs/research/, written as
experiments). Everywhere else a tracked file must not narrate it: the order of the work, the tracker's
numbers, the trials that were dropped. The patterns are narrow on purpose: a Flink or Spark *session cluster*,
a ``SparkSession``, pytest's ``scope="session"`` and a loop's *round* are what the code does and pass. This file
passes its own check: the lines its patterns must catch are written in pieces, joined when the test runs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXEMPT_PREFIXES = ("docs/research/",)
"""The lab's record of its experiments, where the order of the work is part of the story."""
EXEMPT_FILES = {"CHANGELOG.md"}
"""The release notes (history by design)."""
EXEMPT_SUFFIXES = (".csv", ".parquet", ".png", ".jar", ".json.gz")

_ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|"
    "fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth"
)
NARRATION = {
    "a numbered or relative session of work": re.compile(
        rf"\b(?:this|that|previous|next|earlier|later|last|{_ORDINALS})\s+session\b(?!\s*cluster)|\bsessions? \d+\b",
        re.IGNORECASE,
    ),
    "a turn of work": re.compile(r"\bturn[ _-]?1(?![0-9])|\bturn \d+'s\b", re.IGNORECASE),
    "an issue number": re.compile(r"\bissues? #?\d+\b", re.IGNORECASE),
    # "a running fit is not kept" says what the code does; a trial reported as dropped narrates.
    "a trial dropped": re.compile(
        r"(?<!\bare )(?<!\bis )(?<!\bwas )(?<!\bwere )(?<!\bif )\bnot kept\b|\btried,? (?:and )?dropped\b",
        re.IGNORECASE,
    ),
    "a numbered or relative round": re.compile(
        r"\b(?:this|that|previous|next|earlier|later|last)\s+round[ ]of[ ]work\b|\bround(?:s)?[ ]of[ ]work\b|"
        r"\b(?:this|the previous|an earlier) round's (?:fixes|changes|work)\b",
        re.IGNORECASE,
    ),
    "a date of work": re.compile(
        r"\b(?:re-)?measured on 20\d\d-\d\d-\d\d\b|\bruns? on 20\d\d-\d\d-\d\d\b", re.IGNORECASE
    ),
}
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


# Made-up lines of the shape each pattern catches (X stands for any subject), one or more per pattern, each
# in pieces joined as the test runs, so that this file does not read as narration itself.
@pytest.mark.parametrize(
    "pieces",
    [
        ("the fourteenth ", "session changed X"),
        ("until the tenth ", "session of issue", " 0, X was"),
        ("TURN", "_1_X = {}"),
        ("turn", " 1's X"),
        ("two changes to X were tried this ", "session and not", " kept"),
        ("fixtures of X (issue", " 0)"),
        ("X takes 1 s (session", " 0: 2 s)"),
        ("X re-measured on ", "2000-01-01"),
        ("before this round", "'s fixes"),
    ],
)
def test_narration_is_caught(pieces: tuple[str, ...]) -> None:
    line = "".join(pieces)
    assert narration_in(line), line


@pytest.mark.parametrize(
    "line",
    [
        "a loopback Flink 2.3 session cluster of one-slot TaskManagers",
        "spark = SparkSession.builder.getOrCreate()",
        '@pytest.fixture(scope="session")',
        "start_new_session=True",
        "Mean workload over the stretch as long as this round's observation",
        "return 1",
        "the first session cluster the fixture starts",
        "beside any Flink session or application cluster",
        "History, counters and the model's own state (a running fit is not kept)",
        "if not kept:",
        'assert aside.read_text() == raw, "the refused document was not kept byte for byte"',
    ],
)
def test_what_the_code_does_passes(line: str) -> None:
    assert not narration_in(line), line

"""The policy lab's trace corpus: real workload series in families, split once into two halves.

Policies are tuned on the development half only and compared on the held-out half, so a result
on held-out traces was not fitted to them. The split is a fixed rule of the names
(:func:`split_halves`), recorded in ``traces/corpus/index.csv`` when ``scripts/make_traces.py``
builds the corpus; this module reads that index.
"""

from __future__ import annotations

import csv
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.trace import TraceError, read_text_lines

CORPUS_DIR = Path(__file__).resolve().parent.parent / "traces" / "corpus"
INDEX_PATH = CORPUS_DIR / "index.csv"
INDEX_COLUMNS = ("name", "family", "half", "source", "package", "licence", "description")

Half = Literal["dev", "held-out"]
HALVES: tuple[Half, ...] = ("dev", "held-out")


class CorpusError(ValueError):
    """A missing or malformed corpus index; the message names the file, the line where there is one, and the problem."""


@dataclass(frozen=True)
class CorpusTrace:
    """One trace of the corpus as the index records it."""

    name: str
    family: str
    half: Half
    path: Path
    source: str
    licence: str


def split_halves(traces: Iterable[tuple[str, str]]) -> dict[str, Half]:
    """Assign each ``(name, family)`` to a half: within each family, names sorted by the SHA-256 hex
    digest of the name alternate dev, held-out, dev, ... starting with dev.

    The hash gives an order nobody chose, so no one picks which traces are held out; alternating
    within a family puts every family with two or more traces in both halves.

    >>> split_halves([("a", "flat"), ("b", "flat"), ("c", "steps")])
    {'b': 'dev', 'a': 'held-out', 'c': 'dev'}
    """
    by_family: dict[str, list[str]] = defaultdict(list)
    for name, family in traces:
        by_family[family].append(name)
    halves: dict[str, Half] = {}
    for names in by_family.values():
        ordered = sorted(names, key=lambda name: hashlib.sha256(name.encode()).hexdigest())
        for position, name in enumerate(ordered):
            halves[name] = HALVES[position % 2]
    return halves


def load_index(path: Path | str = INDEX_PATH) -> list[CorpusTrace]:
    """Read the corpus index; raises :class:`CorpusError` naming the file (and line) on any problem."""
    path = Path(path)
    try:
        lines = read_text_lines(path, what="corpus index")
    except TraceError as exc:
        raise CorpusError(str(exc)) from None
    traces: list[CorpusTrace] = []
    seen: set[str] = set()
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
        if header is None:
            raise CorpusError(f"{path}:1: empty file, expected header {','.join(INDEX_COLUMNS)!r}")
        if tuple(cell.strip() for cell in header) != INDEX_COLUMNS:
            raise CorpusError(f"{path}:1: expected header {','.join(INDEX_COLUMNS)!r}, got {','.join(header)!r}")
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(INDEX_COLUMNS):
                raise CorpusError(f"{path}:{line_no}: expected {len(INDEX_COLUMNS)} columns, got {len(row)}")
            fields = dict(zip(INDEX_COLUMNS, (cell.strip() for cell in row), strict=True))
            name, half = fields["name"], fields["half"]
            if not name or Path(name).name != name or name.startswith("."):
                raise CorpusError(f"{path}:{line_no}: bad trace name {name!r}")
            if name in seen:
                raise CorpusError(f"{path}:{line_no}: duplicate trace name {name!r}")
            if not fields["family"]:
                raise CorpusError(f"{path}:{line_no}: trace {name!r} has no family")
            if half not in HALVES:
                raise CorpusError(f"{path}:{line_no}: half must be one of {', '.join(HALVES)}, got {half!r}")
            trace_path = path.parent / f"{name}.csv"
            if not trace_path.is_file():
                raise CorpusError(f"{path}:{line_no}: trace file {trace_path.name} is missing")
            seen.add(name)
            traces.append(
                CorpusTrace(
                    name=name,
                    family=fields["family"],
                    half="dev" if half == "dev" else "held-out",
                    path=trace_path,
                    source=fields["source"],
                    licence=fields["licence"],
                )
            )
    except csv.Error as exc:
        raise CorpusError(f"{path}:{reader.line_num}: not CSV: {exc}") from None
    if not traces:
        raise CorpusError(f"{path}: the corpus index lists no traces")
    return traces


def select(half: Literal["dev", "held-out", "all"], path: Path | str = INDEX_PATH) -> list[CorpusTrace]:
    """The traces of one half of the corpus (or all of them), in index order."""
    if half not in (*HALVES, "all"):
        raise ValueError(f"half must be one of dev, held-out, all, got {half!r}")
    return [trace for trace in load_index(path) if half == "all" or trace.half == half]

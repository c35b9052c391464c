"""Record what every policy decides on a fixed set of traces, or compare two records.

A refactoring must leave every figure as it was. ``record DIR`` replays the shipped traces and a handful of
corpus traces of different families under every policy, the optimal schedule and the operator-DAG testbed,
in both rescale-cost regimes, on fixed seeds, and writes each ``perdix evaluate`` summary (timings removed)
plus the demo's simulate summary to DIR. ``compare A B`` prints every value that differs and exits 1 if any.

    .venv/bin/python scripts/behaviour_snapshot.py record /tmp/before [taylor,corpus-a]
    .venv/bin/python scripts/behaviour_snapshot.py compare /tmp/before /tmp/after

A comma-separated list of trace names after DIR records only those (compare then checks the files present in both);
a summary already in DIR is kept, so an interrupted record resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PERDIX = [sys.executable, "-m", "cli"]
POLICIES = "daedalus,static,flink-autoscaler,hpa,keda-lag,ds2,oracle,daedalus-per-operator,justin,qescalor,optimal"
TRACES = (
    ("taylor", "traces/taylor.csv", 2.0),
    ("bank_calls", "traces/bank_calls.csv", 3.0),
    ("corpus-a", "traces/corpus/motorway_traffic.csv", 3.0),
    ("corpus-b", "traces/corpus/vic_electricity.csv", 3.0),
    ("corpus-c", "traces/corpus/google_stock.csv", 3.0),
    ("corpus-d", "traces/corpus/blog_pageviews.csv", 3.0),
)
VOLATILE = ("loop_latency", "elapsed", "wall", "cpu_s", "solve_s")
"""Keys whose values are timings of this machine, not behaviour."""


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not any(word in k for word in VOLATILE)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _run(args: list[str], out: Path) -> None:
    result = subprocess.run([*PERDIX, *args, "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"perdix {' '.join(args)} failed:\n{result.stderr[-2000:]}")


def record(directory: Path, only: set[str] | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / "runs"
    for cost in ("restart", "in-place"):
        for name, path, hours in TRACES:
            if only is not None and name not in only:
                continue
            out = scratch / f"{name}-{cost}"
            if (directory / f"{name}-{cost}.json").exists():
                continue
            print(f"evaluate {name} ({cost}, {hours} h)", flush=True)
            _run(
                [
                    "evaluate",
                    "--trace",
                    path,
                    "--hours",
                    str(hours),
                    "--policies",
                    POLICIES,
                    "--no-plots",
                    "--seed",
                    "7",
                    "--jobs",
                    "2",
                    "--rescale-cost",
                    cost,
                ],
                out,
            )
            summary = json.loads((out / "summary.json").read_text())
            (directory / f"{name}-{cost}.json").write_text(json.dumps(_strip(summary), indent=1, sort_keys=True))
    if only is not None and "demo" not in only:
        return
    print("simulate demo", flush=True)
    out = scratch / "demo"
    _run(["simulate", "--trace", "traces/bank_calls.csv", "--policy", "daedalus", "--hours", "6"], out)
    summary = json.loads((out / "summary.json").read_text())
    (directory / "demo.json").write_text(json.dumps(_strip(summary), indent=1, sort_keys=True))


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _diff(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}/{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}"[:400])


def compare(before: Path, after: Path) -> int:
    differences: list[str] = []
    files = [f for f in sorted(before.glob("*.json")) if (after / f.name).exists()]
    if not files:
        differences.append(f"no summary of {before} is in {after}")
    for file in files:
        other = after / file.name
        _diff(_strip(json.loads(file.read_text())), _strip(json.loads(other.read_text())), file.stem, differences)
    for line in differences:
        print(line)
    print(f"{len(differences)} difference(s) over {len(files)} summaries")
    return 1 if differences else 0


def main(argv: list[str]) -> int:
    if len(argv) in (2, 3) and argv[0] == "record":
        record(Path(argv[1]), set(argv[2].split(",")) if len(argv) == 3 else None)
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

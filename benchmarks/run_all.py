"""Runs every benchmark script in benchmarks/ in turn (``make bench``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import benchmarks


def main() -> None:
    """Import and run each ``benchmarks.bench_*`` module's ``main``."""
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    for name in names:
        print(f"\n=== benchmarks.{name}", flush=True)
        start = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        saved = sys.argv
        sys.argv = [name]
        try:
            module.main()
        finally:
            sys.argv = saved
        print(f"=== {name}: {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()

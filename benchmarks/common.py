"""Paths and helpers shared by the benchmark scripts."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
SHIPPED_TRACES = ("bank_calls", "taylor")

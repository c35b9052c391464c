"""Shared test configuration: hypothesis profiles and small helpers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

settings.register_profile("default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Commands under test configure logging for the process (level, renderer); undo it after each
    test so a later test's ``capture_logs`` sees every event."""
    yield
    structlog.reset_defaults()

"""The real Flink cluster (session scope, shared by the modules here), the Flink release it runs, and the recording
proxy in front of it.

Every test here runs on Flink 2.3; a module marked ``both_flink_versions`` runs on the 1.20 LTS line too (its
tests' ids end in ``[flink-2.3]`` and ``[flink-1.20]``), one cluster at a time. ``PERDIX_FLINK_VERSIONS`` (a comma-
separated list of series) keeps the runs on those releases only; tests that start no cluster run where 2.3 does.
scripts/run-tests.sh splits ``make test``'s real-time runs so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from lab.flink.cluster import FLINK_RELEASES
from tests.fixtures.flink import FlinkCluster, flink_cluster, flink_version  # noqa: F401  (fixtures)
from tests.flink.proxy import RecordingProxy

DEFAULT_SERIES = next(iter(FLINK_RELEASES))
BOTH_MARKER = "both_flink_versions"
both_flink_versions = getattr(pytest.mark, BOTH_MARKER)
"""Module mark (``pytestmark``): run the module's tests on every release of FLINK_RELEASES, not on 2.3 alone."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{BOTH_MARKER}: run on every Flink release the tests know (2.3 and 1.20)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give every test on a cluster its release: the default, or each one for a module marked both_flink_versions."""
    if "flink_version" not in metafunc.fixturenames:
        return
    both = metafunc.definition.get_closest_marker(BOTH_MARKER) is not None
    series = list(FLINK_RELEASES) if both else [DEFAULT_SERIES]
    metafunc.parametrize("flink_version", series, indirect=True, scope="session", ids=[f"flink-{s}" for s in series])


def selected_series() -> set[str] | None:
    """The series PERDIX_FLINK_VERSIONS keeps (None: all); a series the tests do not know fails the run."""
    raw = os.environ.get("PERDIX_FLINK_VERSIONS", "").strip()
    if not raw:
        return None
    wanted = {part.strip() for part in raw.split(",") if part.strip()}
    unknown = wanted - set(FLINK_RELEASES)
    if unknown:
        raise pytest.UsageError(
            f"PERDIX_FLINK_VERSIONS: unknown series {sorted(unknown)} (known: {', '.join(FLINK_RELEASES)})"
        )
    return wanted


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the runs on releases PERDIX_FLINK_VERSIONS leaves out (tests without a cluster count as 2.3's)."""
    wanted = selected_series()
    if wanted is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        series = callspec.params.get("flink_version", DEFAULT_SERIES) if callspec is not None else DEFAULT_SERIES
        in_here = item.nodeid.startswith("tests/flink/")
        (kept if not in_here or series in wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def proxy(flink_cluster: FlinkCluster) -> Iterator[RecordingProxy]:  # noqa: F811  (the fixture above)
    """A recording proxy in front of the cluster's REST API: what the agent talks to instead of the JobManager."""
    recording = RecordingProxy(flink_cluster.rest_url).start()
    try:
        yield recording
    finally:
        recording.stop()

"""Single-threaded BLAS around model calls.

ARIMA fits and Kalman filters do many tiny matrix operations; OpenBLAS spreading each of them over
threads on a busy two-core node made a loop's update+predict about ten times slower (83 ms against
6 ms median, measured with other processes running). The limit is process-wide while it holds, so
it only ever lowers contention for other threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_controller: Any = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the block with BLAS limited to one thread (a no-op if threadpoolctl is unavailable)."""
    global _controller
    try:
        if _controller is None:
            import scipy.linalg  # noqa: F401 - load scipy's BLAS so the controller sees it
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        limiter = _controller.limit(limits=1, user_api="blas")
    except Exception:  # noqa: BLE001 - a missing helper costs speed, never correctness
        yield
        return
    with limiter:
        yield

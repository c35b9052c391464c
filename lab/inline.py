"""An executor that runs submitted work at once, for deterministic replays and benchmarks.

The forecaster hands its model fits to an executor so that in production they run in a background thread
beside the loop. A replay must not let fits race the clock, so it passes this one: the fit is done when
``submit`` returns, and ``spent_s`` says how long all of them took (booked as background time, not loop
latency).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class InlineExecutor(Executor):
    """Runs each submitted call at once in the caller's thread; a call that raises gives a failed future."""

    def __init__(self) -> None:
        self.spent_s = 0.0
        """Seconds spent in submitted work so far."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        start = time.perf_counter()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller reads the failure from the future, as from a thread's
            future.set_exception(exc)
        finally:
            self.spent_s += time.perf_counter() - start
        return future

"""The replays' inline executor: work done when submit returns, failures in the future, time booked."""

from __future__ import annotations

import time
from concurrent.futures import Executor

import pytest

from lab.inline import InlineExecutor


def test_submitted_work_is_done_when_submit_returns_and_its_time_is_booked() -> None:
    executor = InlineExecutor()
    assert isinstance(executor, Executor)
    calls: list[tuple[int, int]] = []

    def work(a: int, *, b: int) -> int:
        calls.append((a, b))
        time.sleep(0.02)
        return a + b

    future = executor.submit(work, 2, b=3)
    assert calls == [(2, 3)] and future.done() and future.result() == 5
    assert executor.spent_s >= 0.02
    executor.submit(work, 1, b=1)
    assert executor.spent_s >= 0.04


def test_a_failure_is_delivered_through_the_future_not_raised() -> None:
    executor = InlineExecutor()

    def broken() -> None:
        raise ValueError("no fit")

    future = executor.submit(broken)
    assert future.done()
    with pytest.raises(ValueError, match="no fit"):
        future.result()

"""The loop plans within what the scale target can run now (a session cluster's free slots)."""

from __future__ import annotations

from structlog.testing import capture_logs

from lab.replay import Replay
from lab.simulated import SimulatedScaler
from tests.agent.test_loop import STEP_AT_S, make_settings, step_trace


class SlotBound(SimulatedScaler):
    """The simulated job's scaler on a cluster of ``slots`` slots (reads recorded)."""

    def __init__(self, replay: Replay, slots: int | None) -> None:
        super().__init__(replay.job)
        self.slots = slots
        self.asked: list[int] = []

    def reachable_parallelism(self, upper: int) -> int | None:
        self.asked.append(upper)
        return None if self.slots is None else min(upper, self.slots)


def replay_on(
    slots: int | None, kind: type[SlotBound] = SlotBound
) -> tuple[Replay, SlotBound, list[dict[str, object]]]:
    """The step trace (45k -> 95k/s; 14 workers wanted after it, 9 carry 97k/s) on ``slots`` slots (or as
    ``kind`` reads them)."""
    run = Replay(step_trace(), make_settings(), hours=1.5)
    run.scaler = scaler = kind(run, slots)
    with capture_logs() as logs:
        run.agent = run.start_agent()
        run.run()
    return run, scaler, logs


def test_a_step_is_met_with_the_most_the_slots_hold_not_a_refused_larger_target() -> None:
    run, scaler, logs = replay_on(9)
    executed = [(t, n) for t, n, dry in scaler.requests if not dry]
    assert executed and all(n <= 9 for _, n in executed), executed
    assert any(t >= STEP_AT_S and n == 9 for t, n in executed), executed
    assert set(scaler.asked) == {16}, "asked each round with the configured max_parallelism"
    capped = [e for e in logs if e["event"] == "planner.capped"]
    assert len(capped) == 1 and capped[0]["max_parallelism"] == 9 and capped[0]["configured"] == 16


def test_unbounded_or_unknown_reach_plans_within_the_settings() -> None:
    # The same step with the reach unknown wants more than 9: the cap above is what kept it there.
    _, scaler, logs = replay_on(None)
    assert max(n for _, n, dry in scaler.requests if not dry) > 9
    assert not [e for e in logs if e["event"].startswith("planner.")]


class Flaky(SlotBound):
    """Slots that cannot be read until the step, then 9, then 16 again an hour in (TaskManagers added)."""

    def reachable_parallelism(self, upper: int) -> int | None:
        now = self.job.now_s
        if now < STEP_AT_S:
            raise RuntimeError("connection refused")
        return min(upper, 9 if now < 3600 else 16)


def test_a_failed_read_plans_within_the_settings_and_every_change_of_reach_is_logged_once() -> None:
    _, scaler, logs = replay_on(None, Flaky)
    events = [e["event"] for e in logs if e["event"].startswith("planner.")]
    assert events[0] == "planner.reach_unread" and set(events) == {
        "planner.reach_unread",
        "planner.capped",
        "planner.uncapped",
    }
    assert events.count("planner.reach_unread") == 1, "said once, not every round it fails"
    assert events.count("planner.capped") == 1 and events.count("planner.uncapped") == 1
    executed = [(t, n) for t, n, dry in scaler.requests if not dry]
    assert [n for t, n in executed if t < 3600] and all(n <= 9 for t, n in executed if t < 3600), executed


class Lapsing(SlotBound):
    """Nine slots, read until an hour in; after that every read fails."""

    def reachable_parallelism(self, upper: int) -> int | None:
        if self.job.now_s >= 3000:
            raise RuntimeError("connection refused")
        return min(upper, 9)


def test_an_unread_round_keeps_the_last_bound_read() -> None:
    _, scaler, logs = replay_on(None, Lapsing)
    events = [e["event"] for e in logs if e["event"].startswith("planner.")]
    assert events == ["planner.capped", "planner.reach_unread"], events
    assert all(n <= 9 for _, n, dry in scaler.requests if not dry), scaler.requests

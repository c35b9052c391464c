"""The rescale history: bounded, typed, and kept in the knowledge document in the form it always had."""

from __future__ import annotations

from agent.knowledge.schema import RescaleRecord
from agent.rescales import MAX_HISTORY, Rescale, RescaleHistory


def test_a_whole_job_and_a_per_vertex_record_serialise_as_the_document_keeps_them() -> None:
    whole = Rescale(
        at=60.0,
        from_parallelism=4,
        to_parallelism=6,
        confirmed=6,
        predicted_recovery_s=90.0,
        downtime_s=2.5,
        reasons=("scale out",),
    )
    assert whole.to_dict() == {
        "at": 60.0,
        "from": 4,
        "to": 6,
        "confirmed": 6,
        "dry_run": False,
        "predicted_recovery_s": 90.0,
        "downtime_s": 2.5,
        "reasons": ["scale out"],
    }
    vertices = Rescale(at=120.0, from_parallelism=2, to_parallelism=3, vertices={"cost": (2, 3)}, dry_run=True)
    assert vertices.to_dict() == {
        "at": 120.0,
        "from": 2,
        "to": 3,
        "vertices": {"cost": [2, 3]},
        "confirmed": None,
        "dry_run": True,
        "downtime_s": None,
        "reasons": [],
    }
    assert "at" not in vertices.fields() and vertices.fields()["vertices"] == {"cost": [2, 3]}


def test_the_history_keeps_the_newest_records_only() -> None:
    history = RescaleHistory()
    for i in range(MAX_HISTORY + 25):
        history.add(Rescale(at=float(i), from_parallelism=1, to_parallelism=2))
    assert len(history) == MAX_HISTORY
    assert history[0].at == 25.0 and history[-1].at == MAX_HISTORY + 24


def test_pending_rescales_settle_at_what_the_target_reached_and_round_trip_through_the_schema() -> None:
    history = RescaleHistory([Rescale(at=1.0, from_parallelism=2, to_parallelism=4, pending=True)])
    assert [r.to_parallelism for r in history.pending()] == [4]
    assert history.to_list()[0]["pending"] is True
    history.settle(4)
    assert history.pending() == [] and history[0].confirmed == 4 and history.to_list()[0]["pending"] is False
    stored = [RescaleRecord.model_validate(row) for row in history.to_list()]
    assert RescaleHistory.from_stored(stored).to_list() == history.to_list()

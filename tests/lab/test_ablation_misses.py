"""The ablation benchmark's list of missed episodes (``--misses``): every miss, the avoidable ones marked."""

from __future__ import annotations

from benchmarks.bench_daedalus_ablation import missed_lines


def episode(kind: str, start: int, end: int | None, length: int) -> dict[str, object]:
    return {"kind": kind, "start_s": start, "end_s": end, "length_s": length, "stops": 1, "falling_behind_s": 0}


def test_each_missed_episode_is_a_line_marked_avoidable_where_the_optimal_has_none() -> None:
    results = {
        "daedalus": {
            ("lga", 7): {"slo_misses": 1, "slo_missed_episodes": [episode("rescale", 7320, 7632, 312)]},
            ("lake", 7): {"slo_misses": 1, "slo_missed_episodes": [episode("overload", 10, None, 700)]},
            ("calm", 7): {"slo_misses": 0, "slo_missed_episodes": []},
        }
    }
    optimal = {("lga", 7): {"slo_misses": 0}, ("lake", 7): {"slo_misses": 2}, ("calm", 7): {"slo_misses": 0}}
    lines = missed_lines(results, optimal, "daedalus")
    assert len(lines) == 2
    lake, lga = lines  # sorted by trace
    assert lga.startswith("lga") and " avoidable " in lga and "rescale" in lga and "from  7320 s to 7632 s" in lga
    assert lake.startswith("lake") and "avoidable" not in lake and "still open" in lake
    assert missed_lines(results, optimal, "other variant") == []

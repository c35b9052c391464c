"""PromQL pieces the two settings trees build their default queries from, and the check every query passes.

The job-scope queries (``agent.settings.PromQLQueries``) group by worker, the per-vertex ones
(``agent.operator_settings.OperatorQueries``) by vertex and subtask; both read a task's busy share from
Flink's ``accumulate*TimeMs`` counters in the same way.
"""

from __future__ import annotations


def accumulated_time_rate(kind: str, *, selector: str, by: str, drop_nan: bool = False) -> str:
    """Milliseconds per second a task spent ``kind`` (Busy, Idle or BackPressured), summed ``by`` the labels
    given, from Flink's ``accumulate{kind}TimeMs`` counters matching ``selector``.

    ``drop_nan``: the first scrape of a new task attempt reads NaN, which would make ``rate()`` NaN for a
    whole window; a subquery over the non-negative samples leaves it out (``{window}`` and ``{step}`` are the
    settings' placeholders)."""
    series = f"flink_taskmanager_job_task_accumulate{kind}TimeMs{{{selector}}}"
    if drop_nan:
        return f"sum by ({by}) (rate(({series} >= 0)[{{window}}s:{{step}}s]))"
    return f"sum by ({by}) (rate({series}[{{window}}s]))"


def check_query(query: str) -> str:
    """``query`` if it is not empty and its brackets balance, else ValueError (a settings validator)."""
    if not query.strip():
        raise ValueError("query is empty")
    for open_, close in ("()", "[]", "{}"):
        if query.count(open_) != query.count(close):
            raise ValueError(f"malformed PromQL: unbalanced {open_!r}")
    return query

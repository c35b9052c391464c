"""PromQL pieces the two settings trees build their default queries from, and the check every query passes.

The job-scope queries (``agent.settings.PromQLQueries``) group by worker, the per-vertex ones
(``agent.operator_settings.OperatorQueries``) by vertex and subtask; both read a task's busy share from
Flink's ``accumulate*TimeMs`` counters in the same way.
"""

from __future__ import annotations


def accumulated_time_rate(kind: str, *, selector: str, by: str) -> str:
    """Milliseconds per second a task spent ``kind`` (Busy, Idle or BackPressured), summed ``by`` the labels
    given, from Flink's ``accumulate{kind}TimeMs`` counters matching ``selector``.

    Read through a subquery over the non-negative samples (``{window}`` and ``{step}`` are the settings'
    placeholders): the first scrape of a new task attempt reads NaN busy time, which would make ``rate()`` NaN
    for a whole window. Every kind is read the same way, so a ratio of them (the busy share) divides rates over
    the same points of the same scrapes: a subquery's rate beside a plain ``rate()`` of the same counters
    differs by up to a scrape interval over the window where scrapes land late (a 5-s window read 7 % low)."""
    series = f"flink_taskmanager_job_task_accumulate{kind}TimeMs{{{selector}}}"
    return f"sum by ({by}) (rate(({series} >= 0)[{{window}}s:{{step}}s]))"


def check_query(query: str) -> str:
    """``query`` if it is not empty and its brackets balance, else ValueError (a settings validator)."""
    if not query.strip():
        raise ValueError("query is empty")
    for open_, close in ("()", "[]", "{}"):
        if query.count(open_) != query.count(close):
            raise ValueError(f"malformed PromQL: unbalanced {open_!r}")
    return query

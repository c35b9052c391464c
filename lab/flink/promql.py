"""PromQL over the series Flink 2.3's Prometheus reporter exposes, as measured on the lab cluster.

One place for the queries ``docs/flink-metrics.md`` recommends and ``tests/flink/test_trace_source.py``
verifies on a real cluster across in-place rescales. Why they look the way they do:

- Flink's per-second meters (``numRecordsOutPerSecond``) and time gauges (``busyTimeMsPerSecond``)
  are 60-second averages refreshed every 5 s, and they start from zero with every new task attempt,
  so after a rescale they read low (or high) for a minute. The counters they are built from
  (``numRecordsOut``, ``accumulateBusyTimeMs`` ...) with ``rate()`` are exact over any window.
- Every in-place restart makes new series (the labels ``task_attempt_id`` and ``task_attempt_num``
  change), so a counter never resets inside a series; ``sum(rate(...))`` adds the ended and the new
  series over the window. Never ``rate(sum(...))``: the sum drops at every restart.
- ``accumulateBusyTimeMs`` is NaN in the first scrape of a new attempt, and a NaN first sample makes
  ``rate()`` NaN for a whole window; the busy queries drop NaN samples (``>= 0``) in a subquery.
- A rescale replays the records read since the last checkpoint: the source counts them again and the
  backlog grows by as many, so a workload window that contains a restart over-reads by about
  replayed / window (up to a checkpoint interval of reading per restart). Away from restarts the
  workload query is exact to 1.5 %; with 1 s checkpoints two rescales in a 60 s window cost < 10 %,
  with 5 s checkpoints and a rescale every 20 s it read 12-27 % high. Treat windows that contain a
  restart (uptime below the window) with care; a position-based log end (Kafka's per-partition
  ``currentOffset`` + ``pendingRecords``, the trace job's ``producedRecords``) has no replay bias.
- The backlog's growth is the difference over the same window as the read rate (``delta``), so the
  two terms add up to what was produced in that window. A least-squares slope (``deriv``) lags when a
  rescale turns growth into a drain and missed the production rate by 11-14 % there; the difference
  only suffers when the window's far edge falls into a restart, where the summed backlog is partial,
  and a 60 s window dilutes that below 10 %.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.promql import accumulated_time_rate

OPERATOR = "flink_taskmanager_job_task_operator"


def _series(name: str, matcher: str) -> str:
    """``name{matcher}``, or the bare name when there is no matcher."""
    return f"{name}{{{matcher}}}" if matcher else name


@dataclass(frozen=True)
class FlinkQueries:
    """The queries for one source; ``source`` selects its operator, ``source_task`` the task it runs in."""

    source: str = 'operator_name=~"Source:.*"'
    """Label matcher of the source operator (Flink names it ``Source: NAME``, the reporter ``Source:_NAME``)."""
    source_task: str = 'task_name=~"Source:.*"'
    """Label matcher of the tasks that run the source (a chained task is named ``Source: NAME -> ...``)."""
    window_s: int = 60
    """Range of the rate()/delta() windows, seconds."""
    step: str = "1s"
    """Resolution of the subqueries (the scrape interval)."""
    worker_label: str = "tm_id"
    """Label that names a worker (``tm_id`` standalone; ``pod`` on Kubernetes)."""
    job: str = ""
    """Label matcher of the job for the JobManager's job series (uptime), e.g. ``job_name="my_job"``; empty: any."""

    @property
    def backlog(self) -> str:
        """Records produced and not read yet, summed over the source's readers (FLIP-33 pendingRecords)."""
        return f"sum({OPERATOR}_pendingRecords{{{self.source}}})"

    @property
    def worker_backlog(self) -> str:
        """Records waiting for each worker's source readers (their pendingRecords summed by worker)."""
        return f"sum by ({self.worker_label}) ({OPERATOR}_pendingRecords{{{self.source}}})"

    @property
    def read_rate(self) -> str:
        """Records the source reads per second (its numRecordsOut counters, every attempt's series)."""
        return f"sum(rate({OPERATOR}_numRecordsOut{{{self.source}}}[{self.window_s}s]))"

    @property
    def backlog_growth(self) -> str:
        """Growth of the backlog per second: its difference over the window (a subquery: the sum is no raw series)."""
        return f"delta({self.backlog}[{self.window_s}s:{self.step}]) / {self.window_s}"

    @property
    def workload(self) -> str:
        """Records per second arriving at the source: what it reads plus what piles up."""
        return f"{self.read_rate} + {self.backlog_growth}"

    @property
    def throughput(self) -> str:
        """Records per second each worker's source subtask reads."""
        return f"sum by ({self.worker_label}) (rate({OPERATOR}_numRecordsOut{{{self.source}}}[{self.window_s}s]))"

    def _accumulated(self, kind: str) -> str:
        """The agent's rate of ``accumulate{kind}TimeMs`` (:func:`agent.promql.accumulated_time_rate`) per worker
        over the source's tasks, its window and step filled in."""
        query = accumulated_time_rate(kind, selector=self.source_task, by=self.worker_label)
        return query.replace("{window}", str(self.window_s)).replace("{step}s", self.step)

    def _times(self) -> tuple[str, str, str]:
        """The busy, idle and back-pressured time rates the two shares divide."""
        return self._accumulated("Busy"), self._accumulated("Idle"), self._accumulated("BackPressured")

    @property
    def busy_fraction(self) -> str:
        """Share (0..1) of each worker's source task time spent busy: busy / (busy + idle + back-pressured).

        The ratio of the accumulated times, so a task that started inside the window reads right.
        """
        busy, idle, pressured = self._times()
        return f"{busy} / ({busy} + {idle} + {pressured})"

    @property
    def backpressured_fraction(self) -> str:
        """Share (0..1) of each worker's source task time back-pressured: pressured / (busy + idle + pressured)."""
        busy, idle, pressured = self._times()
        return f"{pressured} / ({busy} + {idle} + {pressured})"

    @property
    def parallelism(self) -> str:
        """Running subtasks of the source (ended attempts' series are stale and not counted)."""
        return f"count({OPERATOR}_numRecordsOut{{{self.source}}})"

    @property
    def uptime(self) -> str:
        """Job uptime in ms; it restarts at 0 with every in-place rescale or failover."""
        return f"max({_series('flink_jobmanager_job_uptime', self.job)})"

    taskmanagers: str = "max(flink_jobmanager_numRegisteredTaskManagers)"
    """TaskManagers registered with the JobManager."""

    @property
    def meter_read_rate(self) -> str:
        """Records/s the source reads by Flink's meter: a 60 s average restarting with every attempt (not for use)."""
        return f"sum({OPERATOR}_numRecordsOutPerSecond{{{self.source}}})"


@dataclass(frozen=True)
class TraceJobQueries:
    """The trace job's own accounting gauges (jobs/trace-source)."""

    job: str = ""
    """Label matcher of the job, e.g. ``job_name="perdix_trace_test"`` (the reporter writes '-' as '_'); empty: any."""

    @property
    def produced(self) -> str:
        """Records produced in the partitions of the running readers (missing while they restart)."""
        return f"sum({_series(f'{OPERATOR}_producedRecords', self.job)})"

    @property
    def produced_all(self) -> str:
        """Records produced in all partitions, from the JobManager's split enumerator (kept through restarts)."""
        return f"max({_series('flink_jobmanager_job_operator_coordinator_enumerator_producedRecords', self.job)})"

    def production_rate(self, window_s: int = 60) -> str:
        """The true production rate, records/s: the slope of the enumerator's gauge (the ground truth)."""
        return f"deriv({self.produced_all}[{window_s}s:1s])"

    def log_end_rate(self, window_s: int = 60) -> str:
        """The production rate as the readers see it (read position + pending): no replay bias, dips at restarts."""
        return f"deriv({self.produced}[{window_s}s:1s])"

    def verifier(self, name: str) -> str:
        """Sum over the verifier's subtasks of ``verifiedRecords``, ``aheadRecords``, ``duplicateRecords`` or
        ``lostRecords``."""
        return f"sum({_series(f'{OPERATOR}_{name}', self.job)})"

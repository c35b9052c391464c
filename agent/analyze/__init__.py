"""The analyze stage: feeds each observation to the online models and says what they now believe.

One part per concern, each owning its state and its piece of the knowledge document:

* ``restarts``: a restart of the job nobody here caused (its uptime, its parallelism);
* ``capacity``: what the job can process at each scale-out (worker regressions, partition weights);
* ``forecasting``: the workload forecast, hot-reloaded registry models and the rise envelope;
* ``recovery``: the recovery tracker, the watch of each stop until the job caught up and the downtimes
  it teaches the recovery predictor;
* ``candidates``: the evaluation of every candidate scale-out (capacity, downtime, recovery);
* ``analyzer``: :class:`Analyzer`, which runs them as one chain each round and returns an
  :class:`Analysis` (``analysis``);
* ``stage``: :class:`AnalyzeStage`, what the agent needs of an analyze stage (the Analyzer, or the lab's oracle).
"""

from agent.analyze.analysis import Analysis
from agent.analyze.analyzer import Analyzer
from agent.analyze.capacity import load_prior
from agent.analyze.recovery import MeasuredRecovery, WatchedRecovery
from agent.analyze.stage import AnalyzeStage

__all__ = ["Analysis", "AnalyzeStage", "Analyzer", "MeasuredRecovery", "WatchedRecovery", "load_prior"]

"""The per-operator path of the daemon: per-vertex metrics, the job graph, per-vertex plans and writes.

``build_agent`` composes an :class:`~agent.per_operator.loop.OperatorAgent` from the daemon's parts when
``Settings.per_operator`` holds (a per-operator policy on a ``flink-rest`` or ``flinkdeployment`` target).
Both targets read the job graph from Flink's REST API (``scale_target.rest_url``); ``flink-rest`` writes
through it too, ``flinkdeployment`` through the FlinkDeployment. Start-up problems are one line
(:class:`agent.settings.ConfigError`, which the CLI prints before exit 2).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from agent.clock import Clock
from agent.settings import ConfigError, Settings


def build_agent(settings: Settings, *, clock: Clock, parts: Any) -> Any:
    """The per-operator agent over the daemon's ``parts`` (monitor, knowledge, events, telemetry, Kubernetes API)."""
    from agent.execute.flink_rest import FlinkRestScaler, unreachable_reason
    from agent.monitor.prometheus import QueryFailed, _run, connect
    from agent.per_operator.execute import FlinkDeploymentVertexScaler, FlinkRestVertexScaler, VertexScaler
    from agent.per_operator.loop import OperatorAgent
    from agent.per_operator.monitor import FlinkGraphReader, OperatorMonitor, VertexMonitor

    target = settings.scale_target
    rest = parts.scaler if isinstance(parts.scaler, FlinkRestScaler) else None
    if rest is None:
        reason = unreachable_reason(target)
        if reason is not None:
            raise ConfigError(f"{reason} (the per-operator policies read the job graph there)")
        rest = FlinkRestScaler(target, clock=clock)
    vertex_scaler: VertexScaler
    if target.kind == "flinkdeployment":
        vertex_scaler = FlinkDeploymentVertexScaler(target, parts.api, parts.events)
    else:
        vertex_scaler = FlinkRestVertexScaler(rest)

    prometheus = connect(settings.prometheus)
    for name, query in settings.operators.queries.model_dump().items():
        rendered = settings.prometheus.render(query)
        try:
            _run(partial(prometheus.custom_query, rendered), settings.prometheus)
        except QueryFailed as exc:
            if exc.kind == "rejected":
                raise ConfigError(f"operators.queries.{name}: {exc}") from None
        except Exception:  # Prometheus down: the whole-job check at start reported it already
            break
    monitor = OperatorMonitor(
        VertexMonitor(settings.prometheus, settings.operators.queries, on_error=parts.telemetry.monitor_error),
        FlinkGraphReader(rest),
    )
    return OperatorAgent(
        settings=settings,
        clock=clock,
        monitor=parts.monitor,
        scaler=parts.scaler,
        knowledge=parts.knowledge,
        events=parts.events,
        telemetry=parts.telemetry,
        operator_monitor=monitor,
        vertex_scaler=vertex_scaler,
    )


__all__ = ["build_agent"]

"""The per-operator path of the daemon: per-vertex metrics, the job graph, per-vertex plans and writes.

``build_planning`` composes the agent's per-vertex planning part (:class:`~agent.per_operator.loop.VertexPlanning`)
from the daemon's parts when ``Settings.per_operator`` holds (a policy with a per-vertex form on a ``flink-rest``
or ``flinkdeployment`` target). Both targets read the job graph from Flink's REST API (``scale_target.rest_url``);
``flink-rest`` writes through it too, ``flinkdeployment`` through the FlinkDeployment. Start-up problems are one
line (:class:`agent.settings.ConfigError`, which the CLI prints before exit 2).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from agent.clock import Clock
from agent.ports import EventSink, Scaler
from agent.settings import ConfigError, Settings

if TYPE_CHECKING:
    from kubernetes import client as k8s

    from agent.execute.flink_rest import FlinkRestScaler
    from agent.per_operator.execute import VertexScaler
    from agent.per_operator.loop import VertexPlanning
    from agent.telemetry import Telemetry


def build_planning(
    settings: Settings,
    *,
    clock: Clock,
    scaler: Scaler,
    api: k8s.ApiClient | None,
    events: EventSink | None,
    telemetry: Telemetry,
) -> VertexPlanning:
    """The per-vertex planning part over the daemon's scale target (``scaler``), Kubernetes API, events and
    telemetry; ConfigError when the job graph cannot be read or a per-vertex query is rejected."""
    from agent.per_operator.loop import vertex_planning
    from agent.per_operator.monitor import FlinkGraphReader, OperatorMonitor, VertexMonitor

    rest = _rest_scaler(settings, clock=clock, scaler=scaler)
    vertex_scaler: VertexScaler
    if settings.scale_target.kind == "flinkdeployment":
        from agent.per_operator.execute import FlinkDeploymentVertexScaler

        if api is None:
            raise ConfigError("scale_target.kind flinkdeployment: no Kubernetes API client to write it through")
        vertex_scaler = FlinkDeploymentVertexScaler(settings.scale_target, api, events)
    else:
        from agent.per_operator.execute import FlinkRestVertexScaler

        vertex_scaler = FlinkRestVertexScaler(rest)
    _check_queries(settings)
    monitor = OperatorMonitor(
        VertexMonitor(settings.prometheus, settings.operators.queries, on_error=telemetry.monitor_error),
        FlinkGraphReader(rest),
    )
    return vertex_planning(settings, monitor=monitor, scaler=vertex_scaler, registry=telemetry.registry)


def _rest_scaler(settings: Settings, *, clock: Clock, scaler: Scaler) -> FlinkRestScaler:
    """The Flink REST client the job graph is read through: the scale target's own, or one at its rest_url."""
    from agent.execute.flink_rest import FlinkRestScaler, unreachable_reason

    if isinstance(scaler, FlinkRestScaler):
        return scaler
    reason = unreachable_reason(settings.scale_target)
    if reason is not None:
        raise ConfigError(f"{reason} (the per-operator policies read the job graph there)")
    return FlinkRestScaler(settings.scale_target, clock=clock)


def _check_queries(settings: Settings) -> None:
    """Run each per-vertex query once: one Prometheus rejects is a ConfigError naming it."""
    from agent.monitor.prometheus import QueryFailed, connect, regex_culprits, run_query

    prometheus = connect(settings.prometheus)
    for name, query in settings.operators.queries.model_dump().items():
        rendered = settings.prometheus.render(query)
        try:
            run_query(partial(prometheus.custom_query, rendered), settings.prometheus)
        except QueryFailed as exc:
            if exc.kind == "rejected":
                culprits = regex_culprits(query, str(exc), settings.prometheus)
                raise ConfigError(f"operators.queries.{name}: {exc}{culprits}") from None
        except Exception:  # Prometheus down: the whole-job check at start reported it already
            break


__all__ = ["build_planning"]
